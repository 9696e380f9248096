//! Measured benchmark data, read from the files users already have, as one list of
//! observations the calibration and validation can set against predictions.
//!
//! Each reader tolerates its format's quirks (a cut-off last line, comment lines, extra
//! columns) and fails with the file and line when a required field is missing or malformed.
//! Every observation remembers where it came from, so residuals can be reported per point.

use serde::Serialize;

/// How a benchmark harness defined TPOT; predictions are compared under the measurement's own
/// definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TpotDefinition {
    /// Inter-token latency: (E2E − TTFT) / (tokens − 1), as vLLM's benchmark reports it.
    Itl,
    /// End-to-end: E2E / tokens, prefill and time to first token included.
    E2e,
}

/// Kernel-time categories a profiler trace is split into (and the breakdown predicts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceCategory {
    Allreduce,
    Moe,
    Attention,
    Gemm,
    Dequant,
    Other,
}

/// Where an observation came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Origin {
    pub file: String,
    /// 1-based line, where the format has lines.
    pub line: Option<usize>,
}

/// What was measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Quantity {
    /// Time per output token of a serving run, seconds.
    Tpot {
        concurrency: u32,
        input_len: Option<u32>,
        output_len: u32,
        definition: TpotDefinition,
        seconds: f64,
    },
    /// Time to first token, seconds.
    Ttft {
        concurrency: u32,
        input_len: Option<u32>,
        seconds: f64,
    },
    /// Output tokens per second of the whole server.
    Throughput {
        concurrency: u32,
        input_len: Option<u32>,
        output_len: Option<u32>,
        tokens_per_second: f64,
    },
    /// Share of decode kernel time in one category (0..1).
    CategoryShare {
        concurrency: u32,
        category: TraceCategory,
        share: f64,
    },
    /// One all-reduce of `bytes` over `gpus` GPUs took `seconds`.
    AllReduce { bytes: f64, gpus: u32, seconds: f64 },
    /// One GEMM (m × k by k × n) in `dtype` took `seconds`.
    Gemm {
        m: u64,
        n: u64,
        k: u64,
        dtype: String,
        seconds: f64,
    },
}

/// One measured value and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    pub quantity: Quantity,
    pub origin: Origin,
}

/// Everything read from one or more files.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MeasuredSet {
    /// System and model named by the file, where it names them.
    pub system: Option<String>,
    pub model: Option<String>,
    pub observations: Vec<Observation>,
}
