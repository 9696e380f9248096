//! The categories a step's time is broken down into. Every operator belongs to one.

use serde::Serialize;

/// Breakdown categories. `gemm` holds the dense projections (attention q/kv/o, dense MLP,
/// lm_head); `attention` the attention kernels over the KV cache; `moe` the router, routed
/// and shared experts; `dequant` separate weight-cast passes; `allreduce` tensor-parallel
/// all-reduces; `alltoall` expert-parallel dispatch/combine; `pipeline` stage-to-stage
/// transfers and waits; `other` norms, rotary, embedding, sampling, logits gather;
/// `overhead` per-kernel gaps/launches and the engine's per-step cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Gemm,
    Attention,
    Moe,
    Dequant,
    Allreduce,
    Alltoall,
    Pipeline,
    Other,
    Overhead,
}

impl Category {
    pub const ALL: [Category; 9] = [
        Category::Gemm,
        Category::Attention,
        Category::Moe,
        Category::Dequant,
        Category::Allreduce,
        Category::Alltoall,
        Category::Pipeline,
        Category::Other,
        Category::Overhead,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Category::Gemm => "gemm",
            Category::Attention => "attention",
            Category::Moe => "moe",
            Category::Dequant => "dequant",
            Category::Allreduce => "allreduce",
            Category::Alltoall => "alltoall",
            Category::Pipeline => "pipeline",
            Category::Other => "other",
            Category::Overhead => "overhead",
        }
    }
    pub fn index(self) -> usize {
        self as usize
    }
}
