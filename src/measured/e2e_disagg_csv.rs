//! Reader for disaggregated serving runs in the `e2e_disagg.csv` form: the model and request
//! columns of `e2e_serving.csv` ([`super::e2e_csv`]), then each role's `prefill_*` and
//! `decode_*` batch size, worker count and layout, the client's concurrency, the engine
//! image and the measured TTFT and TPOT.
//!
//! The same conventions as the aggregated reader: numbers may be written as floats
//! (`8.0`); counts must be whole and at least 1, except the MoE degrees (0 on some dense
//! runs, refused by the layout mapping, not here); an empty `attention_dp_size` is 1.
//! `batch_size` and `num_workers` may be empty (the source left them out on many runs):
//! kept as `None`, never guessed here. An empty `silicon_concurrency` is the decode pool's
//! `batch_size × num_workers × attention_dp_size` where all three are given (the
//! aggregated reader's rule: `batch_size` is per attention-DP replica), and the row is
//! refused where they are not. Latencies must be positive and finite.

use super::e2e_csv::E2eRun;
use super::measured_error;
use crate::error::Result;
use serde::Serialize;

/// The model and request columns every file must have.
pub const COLUMNS: [&str; 11] = [
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "gemm_quant_mode",
    "moe_quant_mode",
    "isl",
    "osl",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
];

/// Each role's columns, after its `prefill_` or `decode_` prefix.
pub const ROLE_COLUMNS: [&str; 7] = [
    "batch_size",
    "num_workers",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
];

/// Columns a file may have.
pub const OPTIONAL_COLUMNS: [&str; 2] = ["silicon_concurrency", "image"];

/// One role's workers as the file gives them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RoleLayout {
    /// Per attention-DP replica (None: not recorded).
    pub batch_size: Option<u32>,
    /// Replicas of this role (None: not recorded).
    pub num_workers: Option<u32>,
    pub tp: u32,
    pub pp: u32,
    pub attention_dp: u32,
    pub moe_tp: u32,
    pub moe_ep: u32,
}

/// One measured disaggregated run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DisaggRun {
    /// 1-based line in the file.
    pub line: usize,
    pub backend: String,
    pub backend_version: String,
    pub model_path: String,
    pub system: String,
    pub precision: String,
    pub gemm_quant_mode: String,
    pub moe_quant_mode: String,
    pub isl: u32,
    pub osl: u32,
    pub prefill: RoleLayout,
    pub decode: RoleLayout,
    /// The client's concurrent requests.
    pub concurrency: u32,
    pub image: String,
    /// Measured time to first token and decode inter-token latency, seconds.
    pub ttft: f64,
    pub tpot: f64,
}

impl DisaggRun {
    /// One role as an aggregated run, for the aggregated mapping of models and layouts
    /// (`crate::e2e`): its layout, this run's model, precision and lengths.
    pub fn as_e2e(&self, role: &RoleLayout) -> E2eRun {
        E2eRun {
            line: self.line,
            backend: self.backend.clone(),
            backend_version: self.backend_version.clone(),
            model_path: self.model_path.clone(),
            system: self.system.clone(),
            precision: self.precision.clone(),
            gemm_quant_mode: self.gemm_quant_mode.clone(),
            moe_quant_mode: self.moe_quant_mode.clone(),
            isl: self.isl,
            osl: self.osl,
            batch_size: role.batch_size.unwrap_or(1),
            concurrency: self.concurrency,
            campaign: String::new(),
            image: self.image.clone(),
            tp: role.tp,
            pp: role.pp,
            attention_dp: role.attention_dp,
            moe_tp: role.moe_tp,
            moe_ep: role.moe_ep,
            ttft: self.ttft,
            tpot: self.tpot,
        }
    }
}

/// Whether `text` looks like a disaggregated serving CSV (its header names
/// `silicon_tpot_ms`, `prefill_tp_size` and `decode_tp_size`).
pub fn is_disagg_csv(text: &str) -> bool {
    super::csv_header_has(
        text,
        &["silicon_tpot_ms", "prefill_tp_size", "decode_tp_size"],
    )
}

/// Parse a disaggregated serving CSV. `file` labels errors.
pub fn parse_disagg_csv(text: &str, file: &str) -> Result<Vec<DisaggRun>> {
    let (text, mut rdr, headers) = super::open_csv(text, file)?;
    let find = |name: &str| headers.iter().position(|h| h.trim() == name);
    let mut names: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    for role in ["prefill", "decode"] {
        for c in ROLE_COLUMNS {
            names.push(format!("{role}_{c}"));
        }
    }
    let mut idx = Vec::with_capacity(names.len());
    for name in &names {
        idx.push(find(name).ok_or_else(|| {
            measured_error(
                file,
                Some(1),
                format!(
                    "missing column `{name}` (a disaggregated serving CSV has: {})",
                    names.join(",")
                ),
            )
        })?);
    }
    let optional: Vec<Option<usize>> = OPTIONAL_COLUMNS.iter().map(|n| find(n)).collect();
    let mut runs = Vec::new();
    let mut lines = super::CsvLines::new(text);
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = lines.at(e.position());
            measured_error(file, line, format!("unreadable row: {e}"))
        })?;
        let line = lines.at(rec.position()).unwrap_or(0);
        let get = |c: usize| rec.get(idx[c]).unwrap_or("").trim();
        let err = |c: usize, what: &str| {
            measured_error(
                file,
                Some(line),
                format!("`{}` = \"{}\": expected {what}", names[c], get(c)),
            )
        };
        let count = |c: usize, min: f64| -> Result<u32> {
            let v: f64 = get(c).parse().map_err(|_| err(c, "a whole number"))?;
            if !(v.is_finite() && v.fract() == 0.0 && v >= min && v <= u32::MAX as f64) {
                return Err(err(c, &format!("a whole number of at least {min}")));
            }
            Ok(v as u32)
        };
        let maybe = |c: usize| -> Result<Option<u32>> {
            if get(c).is_empty() {
                Ok(None)
            } else {
                count(c, 1.0).map(Some)
            }
        };
        let ms = |c: usize| -> Result<f64> {
            let v: f64 = get(c)
                .parse()
                .map_err(|_| err(c, "a time in milliseconds"))?;
            if !(v.is_finite() && v * 1e-3 >= super::MIN_MEASURED_SECONDS) {
                return Err(err(c, "a positive time in milliseconds"));
            }
            Ok(v * 1e-3)
        };
        let role = |base: usize| -> Result<RoleLayout> {
            Ok(RoleLayout {
                batch_size: maybe(base)?,
                num_workers: maybe(base + 1)?,
                tp: count(base + 2, 1.0)?,
                pp: count(base + 3, 1.0)?,
                attention_dp: maybe(base + 4)?.unwrap_or(1),
                moe_tp: count(base + 5, 0.0)?,
                moe_ep: count(base + 6, 0.0)?,
            })
        };
        let base = COLUMNS.len();
        let prefill = role(base)?;
        let decode = role(base + ROLE_COLUMNS.len())?;
        let extra = |i: usize| optional[i].and_then(|c| rec.get(c)).unwrap_or("").trim();
        let concurrency = match extra(0) {
            "" => match (decode.batch_size, decode.num_workers) {
                (Some(b), Some(w)) => b
                    .saturating_mul(w)
                    .saturating_mul(decode.attention_dp),
                _ => {
                    return Err(measured_error(
                        file,
                        Some(line),
                        "`silicon_concurrency` is empty and so is the decode pool's `batch_size` or `num_workers`: the client's concurrency cannot be known",
                    ))
                }
            },
            v => match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x.fract() == 0.0 && x >= 1.0 && x <= u32::MAX as f64 => {
                    x as u32
                }
                _ => {
                    return Err(measured_error(
                        file,
                        Some(line),
                        format!(
                            "`silicon_concurrency` = \"{v}\": expected a whole number of at least 1"
                        ),
                    ))
                }
            },
        };
        if get(2).is_empty() {
            return Err(err(2, "a Hugging Face model id"));
        }
        let text_of = |c: usize| get(c).to_string();
        runs.push(DisaggRun {
            line,
            backend: text_of(0),
            backend_version: text_of(1),
            model_path: text_of(2),
            system: text_of(3),
            precision: text_of(4),
            gemm_quant_mode: text_of(5),
            moe_quant_mode: text_of(6),
            isl: count(7, 1.0)?,
            osl: count(8, 1.0)?,
            prefill,
            decode,
            concurrency,
            image: extra(1).to_string(),
            ttft: ms(9)?,
            tpot: ms(10)?,
        });
    }
    if runs.is_empty() {
        return Err(measured_error(file, None, "no runs in the file"));
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "backend,backend_version,model_path,system,precision,gemm_quant_mode,moe_quant_mode,isl,osl,prefill_batch_size,prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_concurrency,image,silicon_ttft_ms,silicon_tpot_ms";

    #[test]
    fn reads_rows_with_and_without_worker_counts() {
        let t = format!(
            "{HEAD}\n\
             trtllm,0.8.1,deepseek-ai/DeepSeek-V3,b200,fp8,fp8,fp8_block,8192,1024,1.0,1.0,1.0,1.0,8.0,1.0,8.0,16.0,6.0,8.0,1.0,1.0,8.0,1.0,96,img,2538.2,12.7\n\
             sglang,0.5.8,deepseek-ai/DeepSeek-R1,b200,fp8,fp8,fp8_block,1024,1024,,,8.0,1.0,1.0,1.0,8.0,,,8.0,1.0,1.0,1.0,8.0,512,img,4008.9,16.9\n\
             vllm,0.12.0,Qwen/Qwen3-32B,h100-sxm,fp8,fp8,,4000,1000,1.0,8.0,1.0,1.0,1.0,0.0,0.0,224.0,2.0,4.0,1.0,1.0,0.0,0.0,,img,368.0,8.7\n"
        );
        assert!(is_disagg_csv(&t));
        assert!(!super::super::e2e_csv::is_e2e_csv(&t));
        let r = parse_disagg_csv(&t, "d.csv").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].decode.num_workers, Some(6));
        assert_eq!(r[0].prefill.attention_dp, 8);
        assert_eq!(r[1].prefill.num_workers, None);
        assert_eq!(r[1].decode.batch_size, None);
        // No concurrency recorded: the decode pool's batch × workers × DP.
        assert_eq!(r[2].concurrency, 448);
        assert!((r[0].ttft - 2.5382).abs() < 1e-9);
    }

    #[test]
    fn refuses_bad_rows_with_line_and_field() {
        let row = "trtllm,0.8.1,m/x,b200,fp8,fp8,fp8,8192,1024,1.0,1.0,1.0,1.0,8.0,1.0,8.0,16.0,6.0,8.0,1.0,1.0,8.0,1.0,96,img,2538.2,12.7";
        let bad = row.replace(",6.0,8.0,", ",6.5,8.0,");
        let e = parse_disagg_csv(&format!("{HEAD}\n{bad}\n"), "d.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("d.csv:2") && e.contains("decode_num_workers"),
            "{e}"
        );
        let bad = row.replace(",12.7", ",-1");
        let e = parse_disagg_csv(&format!("{HEAD}\n{bad}\n"), "d.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("silicon_tpot_ms"), "{e}");
        let bad = row.replace("16.0,6.0,", ",,").replace(",96,", ",,");
        let e = parse_disagg_csv(&format!("{HEAD}\n{bad}\n"), "d.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("silicon_concurrency"), "{e}");
    }
}
