//! Typed operator costs and the categories the breakdown sums them into.

use crate::cost::roofline::Bound;
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

/// Time per category, seconds, indexed by `Category::index`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Breakdown(pub [f64; 9]);

impl Breakdown {
    pub fn add(&mut self, c: Category, t: f64) {
        self.0[c.index()] += t;
    }
    pub fn get(&self, c: Category) -> f64 {
        self.0[c.index()]
    }
    pub fn total(&self) -> f64 {
        self.0.iter().sum()
    }
    pub fn scaled(&self, f: f64) -> Breakdown {
        Breakdown(self.0.map(|v| v * f))
    }
    pub fn plus(&self, o: &Breakdown) -> Breakdown {
        let mut r = *self;
        for i in 0..9 {
            r.0[i] += o.0[i];
        }
        r
    }
    /// Kernel time only (no overhead), the denominator a profiler's shares use.
    pub fn kernel_time(&self) -> f64 {
        self.total() - self.get(Category::Overhead)
    }
}

/// One operator of a forward pass on one GPU, with its cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OpCost {
    /// What the serving stack runs (e.g. `q_b_proj`, `routed_experts`, `allreduce_attn`).
    pub name: &'static str,
    pub category: Category,
    /// Floating-point operations on this GPU.
    pub flops: f64,
    /// Bytes moved to or from DRAM (or over the link, for collectives) by this GPU.
    pub bytes: f64,
    /// Kernel time, seconds (roofline or collective model), without fixed costs.
    pub time: f64,
    /// Fixed cost attributed to the op's kernels (gaps or launch), seconds.
    pub overhead: f64,
    pub bound: Bound,
    /// Kernels the op launches.
    pub kernels: u32,
    /// Math dtype the op computes in (for the roofline plot), `None` for memory-only ops.
    pub math: Option<&'static str>,
}

impl OpCost {
    pub fn total(&self) -> f64 {
        self.time + self.overhead
    }
    /// FLOP per byte.
    pub fn intensity(&self) -> f64 {
        if self.bytes > 0.0 {
            self.flops / self.bytes
        } else {
            0.0
        }
    }
}
