//! Reader for kernel tables: one measured kernel (or collective) call per row, in the column
//! layouts of `shared/measured/dev/README.md`, so engineers can hold their own
//! micro-benchmarks against the model with `rooftop validate`.
//!
//! A table's family is recognised by its header alone (columns in any order, names
//! case-insensitive, extra columns ignored); the file name only says which GPU it was taken
//! on (`<family>_<gpu>.csv`, e.g. `gemm_h100-sxm.csv`). The reader is strict: a missing
//! column, a row with a missing or malformed value, an unknown dtype or routing, a size of
//! zero, or a latency that is not a positive finite number is refused with the file, the
//! line and the value. Whether a latency is physically possible (not below the hardware's
//! speed of light) is checked where it is priced, in `kernel_check`.
//!
//! A MoE table may add an `activation` column (gated `silu`/`swiglu`/…, ungated `relu2`);
//! without it a row is gated unless its shape is listed ungated in
//! `configs/kernel-tables/moe-experts.toml` (`moe_experts`), since the shape columns alone
//! cannot say how many matrices an expert has.

use super::gemm_csv::{csv_text, parse_size, split, weight_format_of, CsvText};
use super::measured_error;
use super::moe_experts::{gated_by_activation, ExpertShapes, GATED_ACTIVATIONS};
use crate::error::Result;
use crate::spec::model::UNGATED_ACTIVATIONS;
use crate::spec::{KvDtype, WeightFormat};
use serde::Serialize;
use std::path::Path;

/// Which kind of kernel a table measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Gemm,
    Moe,
    AttentionDecode,
    MlaDecodeModule,
    Nccl,
    VllmCustomAllreduce,
}

impl Family {
    pub const ALL: [Family; 6] = [
        Family::Gemm,
        Family::Moe,
        Family::AttentionDecode,
        Family::MlaDecodeModule,
        Family::Nccl,
        Family::VllmCustomAllreduce,
    ];

    /// The name files and reports use (`gemm`, `moe`, …).
    pub fn name(self) -> &'static str {
        match self {
            Family::Gemm => "gemm",
            Family::Moe => "moe",
            Family::AttentionDecode => "attention_decode",
            Family::MlaDecodeModule => "mla_decode_module",
            Family::Nccl => "nccl",
            Family::VllmCustomAllreduce => "vllm_custom_allreduce",
        }
    }

    /// Columns a table of this family must have (besides `latency_ms`).
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Family::Gemm => &["m", "n", "k", "dtype"],
            Family::Moe => &[
                "dtype",
                "tokens",
                "hidden",
                "inter",
                "topk",
                "experts",
                "tp",
                "ep",
                "distribution",
            ],
            Family::AttentionDecode => &[
                "batch", "context", "heads", "kv_heads", "head_dim", "kv_dtype", "window",
            ],
            Family::MlaDecodeModule => &["heads", "batch", "context", "kv_dtype", "gemm_dtype"],
            Family::Nccl => &["collective", "gpus", "bytes"],
            Family::VllmCustomAllreduce => &["gpus", "bytes", "mode"],
        }
    }

    /// The family whose columns a header holds; the most specific one when several fit.
    pub fn detect(titles: &[String]) -> Option<Family> {
        let has = |f: Family| f.columns().iter().all(|c| titles.iter().any(|t| t == c));
        // MoE before GEMM is moot (GEMM needs m/n/k); MLA before attention: MLA lacks
        // kv_heads, so attention's columns never fit an MLA table and vice versa.
        Family::ALL.into_iter().find(|f| has(*f))
    }
}

/// GEMM math/weight format as the GEMM table names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GemmDtype {
    Bf16,
    /// FP8 weights and activations with per-tensor scales.
    Fp8,
    /// FP8 with DeepSeek-style block scales (1×128 activations, 128×128 weights).
    Fp8Block,
    Nvfp4,
}

impl GemmDtype {
    const ALL: [GemmDtype; 4] = [
        GemmDtype::Bf16,
        GemmDtype::Fp8,
        GemmDtype::Fp8Block,
        GemmDtype::Nvfp4,
    ];

    /// The weight format a row of this dtype is stored in.
    pub fn format(self) -> WeightFormat {
        let name = match self {
            GemmDtype::Bf16 => return WeightFormat::BF16,
            GemmDtype::Fp8 => "fp8",
            GemmDtype::Fp8Block => "fp8-block128",
            GemmDtype::Nvfp4 => "nvfp4",
        };
        name.parse().expect("built-in weight format names parse")
    }

    /// The dtype a table's `dtype` cell names, read through the one table of the tables'
    /// dtype names ([`weight_format_of`]) that the GEMM CSV reader, calibrate and op share.
    fn from_table_name(name: &str) -> Option<GemmDtype> {
        let format = weight_format_of(name).ok()?;
        GemmDtype::ALL.into_iter().find(|d| d.format() == format)
    }
}

/// Fused-MoE weight format as the MoE table names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MoeDtype {
    Bf16,
    Fp8,
    Fp8Block,
    /// INT4 weight-only (W4A16, Marlin).
    Int4Wo,
    /// MXFP4 weights, BF16 activations.
    W4a16Mxfp4,
    Nvfp4,
    /// MXFP4 weights, MXFP8 activations.
    W4a8Mxfp4Mxfp8,
}

/// How tokens were routed to experts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Routing {
    /// The collector's `balanced`: every token's picks dealt to the experts in turn, each
    /// expert the same share (`ops::routing::Routing::RoundRobin`), not uniform random picks.
    Balanced,
    /// `uniform`: each token picks its experts uniformly at random (a user's own benchmark;
    /// `ops::routing::Routing::Balanced`).
    Uniform,
    /// Expert popularity ∝ rank^-alpha.
    PowerLaw(f64),
}

/// A collective as NCCL's table names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CollectiveName {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
}

/// What one row measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum KernelShape {
    Gemm {
        m: u64,
        n: u64,
        k: u64,
        dtype: GemmDtype,
    },
    Moe {
        dtype: MoeDtype,
        tokens: u64,
        hidden: u64,
        /// Per-expert intermediate size before the TP split.
        inter: u64,
        topk: u32,
        experts: u32,
        tp: u32,
        ep: u32,
        routing: Routing,
        /// Gated experts (gate, up, down: SiLU) or ungated (up, down: ReLU²), from the row's
        /// `activation` or, without one, `configs/kernel-tables/moe-experts.toml`.
        gated: bool,
    },
    AttentionDecode {
        batch: u64,
        /// KV length per sequence.
        context: u64,
        /// Query heads on this GPU.
        heads: u32,
        /// KV heads on this GPU.
        kv_heads: u32,
        head_dim: u32,
        kv_dtype: KvDtype,
        /// Sliding window (0: none).
        window: u64,
    },
    MlaDecodeModule {
        /// Heads on this GPU (128 / TP for DeepSeek-V3).
        heads: u32,
        batch: u64,
        context: u64,
        kv_dtype: KvDtype,
        /// Projection weight format (`bfloat16`, `fp8_block`, `nvfp4`).
        gemm_dtype: MoeDtype,
    },
    Nccl {
        collective: CollectiveName,
        gpus: u32,
        /// The message (elements × 2 for fp16).
        bytes: u64,
    },
    VllmCustomAllreduce {
        gpus: u32,
        bytes: u64,
        /// Inside CUDA graphs (decode) rather than eager.
        graph: bool,
    },
}

/// One measured row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRow {
    /// 1-based line in the file.
    pub line: usize,
    pub shape: KernelShape,
    /// The format the summary groups this row under (the table's dtype, collective or mode
    /// column as written).
    pub format: String,
    /// Measured latency of one call, seconds.
    pub seconds: f64,
    /// Kernel named by the table (empty when it has no `kernel` column).
    pub kernel: String,
}

/// One kernel table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelTable {
    pub file: String,
    pub family: Family,
    /// GPU named by the file name (`gemm_<gpu>.csv`), if any.
    pub gpu: Option<String>,
    pub rows: Vec<KernelRow>,
}

/// Whether `text` starts with a kernel table's header (used to route `validate`).
pub fn sniff(text: &str) -> Option<Family> {
    let first = text
        .strip_prefix('\u{feff}')
        .unwrap_or(text)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))?;
    let titles: Vec<String> = first
        .split(',')
        .map(|t| t.trim().trim_matches('"').to_ascii_lowercase())
        .collect();
    if !titles.iter().any(|t| t == "latency_ms") {
        return None;
    }
    Family::detect(&titles)
}

/// The GPU a file name names: the part after the family prefix, `gemm_h100-sxm.csv` →
/// `h100-sxm`.
pub fn gpu_of_file_name(path: &Path, family: Family) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    let rest = stem.strip_prefix(family.name())?.strip_prefix('_')?;
    (!rest.is_empty()).then(|| rest.to_string())
}

/// Read a kernel table file.
pub fn read_kernel_table(path: &Path) -> Result<KernelTable> {
    let text = crate::files::read_text(path)?;
    let mut t = parse_kernel_table(&text, &path.display().to_string())?;
    t.gpu = gpu_of_file_name(path, t.family);
    Ok(t)
}

/// Parse a kernel table. `file` labels errors.
pub fn parse_kernel_table(text: &str, file: &str) -> Result<KernelTable> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let CsvText {
        header_line,
        titles,
        lines,
    } = csv_text(text, file)?;
    let family = Family::detect(&titles).ok_or_else(|| {
        measured_error(
            file,
            Some(header_line),
            format!(
                "not a kernel table: the header ({}) has the columns of none of {}",
                titles.join(","),
                Family::ALL
                    .iter()
                    .map(|f| format!("{} ({},latency_ms)", f.name(), f.columns().join(",")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
    })?;
    let col = |name: &str| titles.iter().position(|t| t == name);
    let latency = col("latency_ms").ok_or_else(|| {
        measured_error(
            file,
            Some(header_line),
            format!("missing column `latency_ms` (header: {})", titles.join(",")),
        )
    })?;
    let kernel = col("kernel");
    let mut rows = Vec::new();
    for (line, row) in lines {
        let fields: Vec<&str> = split(row).collect();
        let r = Row {
            file,
            line,
            fields: &fields,
            titles: &titles,
        };
        let seconds = r.latency(latency)?;
        let (shape, format) = r.shape(family)?;
        rows.push(KernelRow {
            line,
            shape,
            format,
            seconds,
            kernel: kernel
                .and_then(|i| fields.get(i))
                .map(|s| s.to_string())
                .unwrap_or_default(),
        });
    }
    if rows.is_empty() {
        return Err(measured_error(file, None, "no rows after the header"));
    }
    Ok(KernelTable {
        file: file.to_string(),
        family,
        gpu: None,
        rows,
    })
}

/// One data row being read, for error messages with file, line and value.
struct Row<'a> {
    file: &'a str,
    line: usize,
    fields: &'a [&'a str],
    titles: &'a [String],
}

impl Row<'_> {
    fn err(&self, msg: String) -> crate::error::Error {
        measured_error(self.file, Some(self.line), msg)
    }

    fn get(&self, name: &str) -> Result<&str> {
        let i = self
            .titles
            .iter()
            .position(|t| t == name)
            .expect("family columns are checked at the header");
        self.fields
            .get(i)
            .copied()
            .filter(|f| !f.is_empty())
            .ok_or_else(|| self.err(format!("no value for `{name}`")))
    }

    /// The value of a column the table may lack (`None` when absent or empty).
    fn optional(&self, name: &str) -> Option<&str> {
        let i = self.titles.iter().position(|t| t == name)?;
        self.fields.get(i).copied().filter(|f| !f.is_empty())
    }

    /// A positive integer (written `4096` or `4096.0`).
    fn count(&self, name: &str) -> Result<u64> {
        let v = self.get(name)?;
        parse_count(v)
            .filter(|n| *n > 0)
            .ok_or_else(|| self.err(format!("`{name}` = \"{v}\": expected a positive integer")))
    }

    /// A non-negative integer (a window of 0 means none).
    fn count0(&self, name: &str) -> Result<u64> {
        let v = self.get(name)?;
        parse_count(v).ok_or_else(|| {
            self.err(format!(
                "`{name}` = \"{v}\": expected a non-negative integer"
            ))
        })
    }

    fn small(&self, name: &str) -> Result<u32> {
        let n = self.count(name)?;
        u32::try_from(n).map_err(|_| self.err(format!("`{name}` = {n}: too large")))
    }

    fn latency(&self, i: usize) -> Result<f64> {
        let v = self
            .fields
            .get(i)
            .copied()
            .filter(|f| !f.is_empty())
            .ok_or_else(|| self.err("no value for `latency_ms`".into()))?;
        use super::{MAX_KERNEL_SECONDS, MIN_MEASURED_SECONDS};
        match v.parse::<f64>() {
            Ok(ms) if ms.is_finite() && ms > 0.0 => {
                let s = ms * 1e-3;
                if (MIN_MEASURED_SECONDS..=MAX_KERNEL_SECONDS).contains(&s) {
                    Ok(s)
                } else {
                    Err(self.err(format!(
                        "`latency_ms` = \"{v}\": expected one call's time, {} to {} ms; \
                         outside it the value is a unit slip, not a measurement",
                        MIN_MEASURED_SECONDS * 1e3,
                        MAX_KERNEL_SECONDS * 1e3
                    )))
                }
            }
            _ => Err(self.err(format!(
                "`latency_ms` = \"{v}\": expected a positive finite number of milliseconds"
            ))),
        }
    }

    fn kv(&self, name: &str) -> Result<KvDtype> {
        let v = self.get(name)?;
        match v.to_ascii_lowercase().as_str() {
            "bfloat16" | "bf16" => Ok(KvDtype::Bf16),
            "float16" | "fp16" => Ok(KvDtype::Fp16),
            "fp8" | "fp8_e4m3" => Ok(KvDtype::Fp8),
            _ => Err(self.err(format!(
                "`{name}` = \"{v}\": expected bfloat16, float16 or fp8"
            ))),
        }
    }

    fn moe_dtype(&self, name: &str) -> Result<MoeDtype> {
        let v = self.get(name)?;
        Ok(match v.to_ascii_lowercase().as_str() {
            "bfloat16" | "bf16" => MoeDtype::Bf16,
            "fp8" => MoeDtype::Fp8,
            "fp8_block" | "fp8-block" => MoeDtype::Fp8Block,
            "int4_wo" => MoeDtype::Int4Wo,
            "w4a16_mxfp4" => MoeDtype::W4a16Mxfp4,
            "nvfp4" => MoeDtype::Nvfp4,
            "w4a8_mxfp4_mxfp8" => MoeDtype::W4a8Mxfp4Mxfp8,
            _ => {
                return Err(self.err(format!(
                    "`{name}` = \"{v}\": expected bfloat16, fp8, fp8_block, int4_wo, \
                     w4a16_mxfp4, nvfp4 or w4a8_mxfp4_mxfp8"
                )))
            }
        })
    }

    fn shape(&self, family: Family) -> Result<(KernelShape, String)> {
        Ok(match family {
            Family::Gemm => {
                let v = self.get("dtype")?;
                let dtype = GemmDtype::from_table_name(v).ok_or_else(|| {
                    self.err(format!(
                        "`dtype` = \"{v}\": expected bf16, fp8, fp8-block or nvfp4"
                    ))
                })?;
                (
                    KernelShape::Gemm {
                        m: self.count("m")?,
                        n: self.count("n")?,
                        k: self.count("k")?,
                        dtype,
                    },
                    v.to_string(),
                )
            }
            Family::Moe => {
                let d = self.get("distribution")?;
                let routing = match d.strip_prefix("power_law_") {
                    None if d == "balanced" => Routing::Balanced,
                    None if d == "uniform" => Routing::Uniform,
                    Some(a) => match a.parse::<f64>() {
                        Ok(a) if a.is_finite() && a > 0.0 => Routing::PowerLaw(a),
                        _ => {
                            return Err(self.err(format!(
                                "`distribution` = \"{d}\": the exponent must be a positive number"
                            )))
                        }
                    },
                    None => {
                        return Err(self.err(format!(
                            "`distribution` = \"{d}\": expected balanced, uniform or power_law_<exponent>"
                        )))
                    }
                };
                let (topk, experts) = (self.small("topk")?, self.small("experts")?);
                if topk > experts {
                    return Err(self.err(format!("`topk` = {topk} exceeds `experts` = {experts}")));
                }
                let (hidden, inter) = (self.count("hidden")?, self.count("inter")?);
                let gated = match self.optional("activation") {
                    Some(a) => gated_by_activation(a).ok_or_else(|| {
                        self.err(format!(
                            "`activation` = \"{a}\": expected {} (gated experts) or {} (ungated)",
                            GATED_ACTIVATIONS.join(", "),
                            UNGATED_ACTIVATIONS.join(", ")
                        ))
                    })?,
                    None => ExpertShapes::builtin()?
                        .ungated(hidden, inter, topk, experts)
                        .is_none(),
                };
                (
                    KernelShape::Moe {
                        dtype: self.moe_dtype("dtype")?,
                        tokens: self.count("tokens")?,
                        hidden,
                        inter,
                        topk,
                        experts,
                        tp: self.small("tp")?,
                        ep: self.small("ep")?,
                        routing,
                        gated,
                    },
                    self.get("dtype")?.to_string(),
                )
            }
            Family::AttentionDecode => {
                let (heads, kv_heads) = (self.small("heads")?, self.small("kv_heads")?);
                if heads % kv_heads != 0 {
                    return Err(self.err(format!(
                        "`heads` = {heads} is not a multiple of `kv_heads` = {kv_heads}"
                    )));
                }
                (
                    KernelShape::AttentionDecode {
                        batch: self.count("batch")?,
                        context: self.count("context")?,
                        heads,
                        kv_heads,
                        head_dim: self.small("head_dim")?,
                        kv_dtype: self.kv("kv_dtype")?,
                        window: self.count0("window")?,
                    },
                    format!("kv {}", self.get("kv_dtype")?),
                )
            }
            Family::MlaDecodeModule => (
                KernelShape::MlaDecodeModule {
                    heads: self.small("heads")?,
                    batch: self.count("batch")?,
                    context: self.count("context")?,
                    kv_dtype: self.kv("kv_dtype")?,
                    gemm_dtype: self.moe_dtype("gemm_dtype")?,
                },
                format!(
                    "gemm {} kv {}",
                    self.get("gemm_dtype")?,
                    self.get("kv_dtype")?
                ),
            ),
            Family::Nccl => {
                let c = self.get("collective")?;
                let collective = match c.to_ascii_lowercase().as_str() {
                    "all_reduce" | "allreduce" => CollectiveName::AllReduce,
                    "all_gather" | "allgather" => CollectiveName::AllGather,
                    "reduce_scatter" | "reducescatter" => CollectiveName::ReduceScatter,
                    "alltoall" | "all_to_all" => CollectiveName::AllToAll,
                    _ => {
                        return Err(self.err(format!(
                            "`collective` = \"{c}\": expected all_reduce, all_gather, \
                             reduce_scatter or alltoall"
                        )))
                    }
                };
                (
                    KernelShape::Nccl {
                        collective,
                        gpus: self.gpus()?,
                        bytes: self.count("bytes")?,
                    },
                    c.to_string(),
                )
            }
            Family::VllmCustomAllreduce => {
                let m = self.get("mode")?;
                let graph = match m {
                    "vllm_graph" => true,
                    "vllm_eager" => false,
                    _ => {
                        return Err(self.err(format!(
                            "`mode` = \"{m}\": expected vllm_graph or vllm_eager"
                        )))
                    }
                };
                (
                    KernelShape::VllmCustomAllreduce {
                        gpus: self.gpus()?,
                        bytes: self.count("bytes")?,
                        graph,
                    },
                    m.to_string(),
                )
            }
        })
    }

    fn gpus(&self) -> Result<u32> {
        let g = self.small("gpus")?;
        if g < 2 {
            return Err(self.err(format!("`gpus` = {g}: a collective needs at least 2")));
        }
        Ok(g)
    }
}

/// A count written as an integer or an integral float (`4096.0`), zero included.
fn parse_count(v: &str) -> Option<u64> {
    match v.parse::<f64>() {
        Ok(0.0) => Some(0),
        _ => parse_size(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_each_family_by_its_columns() {
        let cases = [
            ("m,n,k,dtype,latency_ms,kernel", Family::Gemm),
            (
                "dtype,tokens,hidden,inter,topk,experts,tp,ep,distribution,latency_ms,kernel",
                Family::Moe,
            ),
            (
                "batch,context,heads,kv_heads,head_dim,kv_dtype,window,latency_ms,kernel",
                Family::AttentionDecode,
            ),
            (
                "model,heads,batch,context,kv_dtype,gemm_dtype,latency_ms,kernel",
                Family::MlaDecodeModule,
            ),
            ("collective,gpus,bytes,latency_ms,nccl", Family::Nccl),
            (
                "gpus,bytes,mode,latency_ms,kernel",
                Family::VllmCustomAllreduce,
            ),
        ];
        for (h, f) in cases {
            assert_eq!(sniff(&format!("{h}\n")), Some(f), "{h}");
        }
        assert_eq!(sniff("m,n,k,dtype\n"), None, "no latency column");
    }

    #[test]
    fn refuses_bad_values_with_file_line_and_value() {
        for (row, needle) in [
            ("1,2,3,bf16,-0.1,x", "-0.1"),
            ("1,2,3,bf16,0,x", "\"0\""),
            ("1,2,3,bf16,NaN,x", "NaN"),
            ("1,2,3,bf16,inf,x", "inf"),
            // A 20-minute GEMM call and a sub-nanosecond one: unit slips.
            ("1,2,3,bf16,1200000,x", "1200000"),
            ("1,2,3,bf16,1e-9,x", "1e-9"),
            ("0,2,3,bf16,0.1,x", "`m` = \"0\""),
            ("1,2,3,fp7,0.1,x", "fp7"),
            ("1,2,,bf16,0.1,x", "`k`"),
        ] {
            let text = format!("m,n,k,dtype,latency_ms,kernel\n{row}\n");
            let e = parse_kernel_table(&text, "t.csv").unwrap_err().to_string();
            assert!(e.contains("t.csv") && e.contains('2'), "{e}");
            assert!(e.contains(needle), "{row}: {e}");
        }
    }

    #[test]
    fn reads_rows_and_the_gpu_from_the_name() {
        let t = parse_kernel_table(
            "collective,gpus,bytes,latency_ms,nccl\nall_reduce,8,1024,0.02,2.29\n",
            "x",
        )
        .unwrap();
        assert_eq!(t.family, Family::Nccl);
        assert_eq!(t.rows[0].line, 2);
        assert!((t.rows[0].seconds - 2e-5).abs() < 1e-15);
        assert_eq!(
            gpu_of_file_name(Path::new("/a/nccl_h100-sxm.csv"), Family::Nccl).as_deref(),
            Some("h100-sxm")
        );
        assert_eq!(gpu_of_file_name(Path::new("mine.csv"), Family::Nccl), None);
    }

    /// A MoE row is gated unless its `activation` says `relu2`, or, in a table without that
    /// column, its shape is listed ungated in `configs/kernel-tables/moe-experts.toml`.
    #[test]
    fn moe_rows_read_gated_from_the_activation_column_or_the_listed_shapes() {
        let gated = |text: &str| -> Vec<bool> {
            parse_kernel_table(text, "t.csv")
                .unwrap()
                .rows
                .iter()
                .map(|r| match r.shape {
                    KernelShape::Moe { gated, .. } => gated,
                    _ => unreachable!(),
                })
                .collect()
        };
        let head = "dtype,tokens,hidden,inter,topk,experts,tp,ep,distribution,latency_ms";
        // No column: Nemotron-3-Nano's listed shape is ungated, DeepSeek-V3's is not.
        assert_eq!(
            gated(&format!(
                "{head}\nbfloat16,8,2688,1856,6,128,1,1,balanced,0.1\n\
                 fp8,8,7168,2048,8,256,1,1,balanced,0.1\n"
            )),
            [false, true]
        );
        // The column decides, whatever the shape; an empty value falls back to the list.
        assert_eq!(
            gated(&format!(
                "{head},activation\nbfloat16,8,2688,1856,6,128,1,1,balanced,0.1,silu\n\
                 fp8,8,7168,2048,8,256,1,1,balanced,0.1,relu2\n\
                 fp8,8,2688,1856,6,128,1,1,balanced,0.1,\n"
            )),
            [true, false, false]
        );
        let e = parse_kernel_table(
            &format!("{head},activation\nbfloat16,8,2688,1856,6,128,1,1,balanced,0.1,tanh\n"),
            "t.csv",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("t.csv:2") && e.contains("tanh") && e.contains("relu2"),
            "{e}"
        );
    }
}
