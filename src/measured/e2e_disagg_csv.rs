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

use super::e2e_csv::{read_request, E2eRun, REQUEST_COLUMNS};
use super::measured_error;
use crate::error::Result;
use serde::Serialize;

/// The measured columns every file must have, after the aggregated form's request columns
/// ([`super::e2e_csv::REQUEST_COLUMNS`]) and before each role's.
pub const MEASURED_COLUMNS: [&str; 2] = ["silicon_ttft_ms", "silicon_tpot_ms"];

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
    /// The run's line, engine, model, system, precision, lengths, the client's concurrent
    /// requests, the engine image and the measured TTFT and TPOT; its layout fields are the
    /// decode pool's ([`DisaggRun::as_e2e`] gives either role's).
    pub request: E2eRun,
    pub prefill: RoleLayout,
    pub decode: RoleLayout,
}

impl DisaggRun {
    /// Every field but the line (see [`E2eRun::fields_without_line`]).
    pub fn fields_without_line(&self) -> String {
        format!(
            "{} {:?} {:?}",
            self.request.fields_without_line(),
            self.prefill,
            self.decode
        )
    }

    /// One role as an aggregated run, for the aggregated mapping of models and layouts
    /// (`crate::e2e`): its layout, this run's model, precision and lengths.
    pub fn as_e2e(&self, role: &RoleLayout) -> E2eRun {
        E2eRun {
            batch_size: role.batch_size.unwrap_or(1),
            tp: role.tp,
            pp: role.pp,
            attention_dp: role.attention_dp,
            moe_tp: role.moe_tp,
            moe_ep: role.moe_ep,
            ..self.request.clone()
        }
    }
}

/// Whether `text` looks like a disaggregated serving CSV (its header names
/// `prefill_tp_size` and `decode_tp_size`: how its runs were made, so a misspelt measured
/// column is refused by name).
pub fn is_disagg_csv(text: &str) -> bool {
    super::csv_header_has(text, &["prefill_tp_size", "decode_tp_size"])
}

/// The columns every file must have: the request and measured columns, then each role's.
fn required_columns() -> Vec<String> {
    let mut names: Vec<String> = REQUEST_COLUMNS
        .iter()
        .chain(&MEASURED_COLUMNS)
        .map(|c| c.to_string())
        .collect();
    for role in ["prefill", "decode"] {
        for c in ROLE_COLUMNS {
            names.push(format!("{role}_{c}"));
        }
    }
    names
}

/// Parse a disaggregated serving CSV. `file` labels errors.
pub fn parse_disagg_csv(text: &str, file: &str) -> Result<Vec<DisaggRun>> {
    let owned = required_columns();
    let names: Vec<&str> = owned.iter().map(String::as_str).collect();
    let kind = "a disaggregated serving CSV";
    super::read_rows(text, file, kind, &names, &OPTIONAL_COLUMNS, |row| {
        let request = read_request(row, 9, 10)?;
        let role = |base: usize| -> Result<RoleLayout> {
            let r = RoleLayout {
                batch_size: row.maybe_count(base)?,
                num_workers: row.maybe_count(base + 1)?,
                tp: row.count(base + 2, 1.0)?,
                pp: row.count(base + 3, 1.0)?,
                attention_dp: row.maybe_count(base + 4)?.unwrap_or(1),
                moe_tp: row.count(base + 5, 0.0)?,
                moe_ep: row.count(base + 6, 0.0)?,
            };
            // A pool is its workers' GPUs together: more than any one deployment holds is a
            // mistyped count, not a measurement to predict.
            let gpus = u64::from(r.num_workers.unwrap_or(1))
                * u64::from(r.tp)
                * u64::from(r.pp)
                * u64::from(r.attention_dp);
            if gpus > crate::options::MAX_PLAN_GPUS {
                return Err(row.err(
                    base + 1,
                    &format!(
                        "a pool of at most {} GPUs (num_workers x tp_size x pp_size x \
                         attention_dp_size; this row's is {gpus})",
                        crate::options::MAX_PLAN_GPUS
                    ),
                ));
            }
            Ok(r)
        };
        let base = REQUEST_COLUMNS.len() + MEASURED_COLUMNS.len();
        let prefill = role(base)?;
        let decode = role(base + ROLE_COLUMNS.len())?;
        let concurrency = match super::concurrency_field(row.extra(0), file, row.line)? {
            Some(c) => c,
            None => match (decode.batch_size, decode.num_workers) {
                (Some(b), Some(w)) => b.saturating_mul(w).saturating_mul(decode.attention_dp),
                _ => {
                    return Err(measured_error(
                        file,
                        Some(row.line),
                        "`silicon_concurrency` is empty and so is the decode pool's `batch_size` or `num_workers`: the client's concurrency cannot be known",
                    ))
                }
            },
        };
        let mut run = DisaggRun {
            request: E2eRun {
                concurrency,
                image: row.extra(1).to_string(),
                ..request
            },
            prefill,
            decode,
        };
        run.request = run.as_e2e(&decode);
        Ok(run)
    })
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
        assert_eq!(r[2].request.concurrency, 448);
        assert!((r[0].request.ttft - 2.5382).abs() < 1e-9);
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
        // A million decode workers of 8 GPUs: no deployment, a mistyped count.
        let bad = row.replace(",6.0,8.0,", ",1000000,8.0,");
        let e = parse_disagg_csv(&format!("{HEAD}\n{bad}\n"), "d.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("d.csv:2") && e.contains("decode_num_workers") && e.contains("65536"),
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
