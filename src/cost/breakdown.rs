//! Priced operators and the categories the breakdown sums them into.

use crate::cost::collective::AllReduceAlgo;
use crate::cost::params::Provenance;
use crate::cost::roofline::Bound;
use crate::ops::Category;
use crate::spec::MathDtype;
use serde::Serialize;

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

/// One operator of a forward pass on one GPU, priced.
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
    pub math: Option<MathDtype>,
    /// Algorithm a collective ran with.
    pub algorithm: Option<AllReduceAlgo>,
    /// Parameter set that priced it.
    pub provenance: Provenance,
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
