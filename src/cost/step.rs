//! The per-layer operator list of the serving stack and its evaluation for one forward pass.
//!
//! For each distinct kind of layer (dense or MoE, full or sliding-window attention) the
//! evaluator builds the operators a real engine runs on one GPU (norms, MLA or GQA
//! projections and attention, dense MLP or router + routed experts + shared experts,
//! all-reduces), costs each with the roofline or the collective model, and multiplies by
//! the number of such layers: identical layers are costed once. Embedding, lm_head, logits
//! gather and sampling run once per pass. Pipeline stages run in sequence for one
//! micro-batch and overlap across micro-batches.

use crate::cost::collective::{self, CollectiveCost};
use crate::cost::moe::expected_experts_touched;
use crate::cost::ops::{Breakdown, Category, OpCost};
use crate::cost::params::CostParams;
use crate::cost::roofline::{roofline, Bound};
use crate::cost::scenario::{Parallel, Pass, Phase};
use crate::error::Result;
use crate::spec::{Attention, FormatKind, MathDtype, ModelSpec, System, WeightFormat};

/// A distinct kind of decoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerClass {
    pub moe: bool,
    /// Sliding-window length, when the layer uses one.
    pub window: Option<u32>,
}

/// The cost of one layer of a class, per GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassCost {
    pub class: LayerClass,
    pub ops: Vec<OpCost>,
    pub breakdown: Breakdown,
}

/// The cost of one forward pass (one decode step, one verify, one prefill).
#[derive(Debug, Clone, PartialEq)]
pub struct StepCost {
    pub pass: Pass,
    /// Time for the pass: each sequence advances `tokens_per_sequence` tokens, seconds.
    pub total: f64,
    /// Time per category, summing to `total`.
    pub breakdown: Breakdown,
    /// Per distinct layer kind (for one micro-batch when pipelined).
    pub classes: Vec<ClassCost>,
    /// Class index of every layer, in order.
    pub layer_class: Vec<usize>,
    /// Operators that run once per pass (embedding, lm_head, sampling, ...).
    pub head: Vec<OpCost>,
}

impl StepCost {
    /// Every operator of the pass with the number of times it runs on the busiest GPU chain.
    pub fn ops_with_counts(&self) -> Vec<(OpCost, u32)> {
        let mut v = Vec::new();
        for (ci, c) in self.classes.iter().enumerate() {
            let n = self.layer_class.iter().filter(|x| **x == ci).count() as u32;
            v.extend(c.ops.iter().map(|o| (*o, n)));
        }
        v.extend(self.head.iter().map(|o| (*o, 1)));
        v
    }

    /// Time of layer `i` (one micro-batch), seconds.
    pub fn layer_time(&self, i: usize) -> f64 {
        self.classes[self.layer_class[i]].breakdown.total()
    }
}

/// One GPU of a system under a parameter set: costs single operators.
#[derive(Debug, Clone)]
pub struct Device<'a> {
    pub system: &'a System,
    pub params: CostParams,
    /// Attainable DRAM bandwidth, bytes/s.
    mem_bw: f64,
    /// Formats whose dequantization runs as a separate pass.
    unfused: [bool; 6],
}

/// Evaluates passes for one (model, system, layout, parameters). Built once, evaluated many
/// times (sweeps reuse it).
#[derive(Debug, Clone)]
pub struct Evaluator<'a> {
    pub model: &'a ModelSpec,
    pub system: &'a System,
    pub par: Parallel,
    pub params: CostParams,
    pub device: Device<'a>,
    classes: Vec<LayerClass>,
    layer_class: Vec<usize>,
}

fn format_slot(f: FormatKind) -> usize {
    FormatKind::ALL.iter().position(|x| *x == f).unwrap_or(0)
}

impl<'a> Device<'a> {
    pub fn new(system: &'a System, params: CostParams) -> Device<'a> {
        let mut unfused = [false; 6];
        if !params.is_sol() {
            for f in &system.spec.engine.unfused_dequant {
                unfused[format_slot(*f)] = true;
            }
        }
        Device {
            system,
            params,
            mem_bw: system.gpu.memory_bandwidth.0 * params.memory_efficiency,
            unfused,
        }
    }

    /// Math dtype a weight format's GEMM runs in on this GPU: native low precision where the
    /// tensor cores have it, BF16 after dequantization otherwise (W4A16 always).
    pub fn math_of(&self, f: FormatKind) -> MathDtype {
        let g = &self.system.gpu;
        let has = |d| g.peak(d).is_some();
        match f {
            FormatKind::Bf16 | FormatKind::Int4 => MathDtype::Bf16,
            FormatKind::Fp8 if has(MathDtype::Fp8) => MathDtype::Fp8,
            FormatKind::Int8 if has(MathDtype::Int8) => MathDtype::Int8,
            FormatKind::Nvfp4 | FormatKind::Mxfp4 if has(MathDtype::Fp4) => MathDtype::Fp4,
            _ => MathDtype::Bf16,
        }
    }

    fn peak(&self, d: MathDtype) -> f64 {
        // validate() guarantees a BF16 peak; other dtypes fall back to it through math_of.
        self.system
            .gpu
            .peak(d)
            .or(self.system.gpu.dense_peak.bf16)
            .map(|p| p.0)
            .unwrap_or(1.0)
    }

    /// Fixed cost of an op's kernels: inside a CUDA graph, the GPU-side gap per kernel;
    /// launched eagerly, the same gap or, when the CPU cannot enqueue kernels as fast as the
    /// GPU finishes them, the launch time the kernels fail to hide.
    fn with_overhead(&self, mut op: OpCost) -> OpCost {
        let p = &self.params;
        let gaps = op.kernels as f64 * p.kernel_gap;
        op.overhead = if self.system.spec.engine.cuda_graphs {
            gaps
        } else {
            gaps.max(op.kernels as f64 * p.kernel_launch - op.time)
        };
        op
    }

    /// Record one operator with its fixed cost.
    #[allow(clippy::too_many_arguments)]
    fn push(
        &self,
        out: &mut Vec<OpCost>,
        name: &'static str,
        category: Category,
        flops: f64,
        bytes: f64,
        time: f64,
        bound: Bound,
        kernels: u32,
        math: Option<&'static str>,
    ) {
        out.push(self.with_overhead(OpCost {
            name,
            category,
            flops,
            bytes,
            time,
            overhead: 0.0,
            bound,
            kernels,
            math,
        }));
    }

    /// Bytes a GEMM reads for `elems` weights stored as `fmt`, and the format it then
    /// computes from. When the engine does not fuse this format's dequantization, a
    /// separate memory-bound pass (named `cast_name`) first reads the quantized weights and
    /// writes BF16 ones, and the GEMM reads BF16.
    fn weights_read(
        &self,
        out: &mut Vec<OpCost>,
        cast_name: &'static str,
        elems: f64,
        fmt: WeightFormat,
    ) -> (f64, FormatKind) {
        if !(self.unfused[format_slot(fmt.kind)] && fmt.kind != FormatKind::Bf16) {
            return (elems * fmt.bytes_per_weight(), fmt.kind);
        }
        let cast_bytes = elems * (fmt.bytes_per_weight() + 2.0);
        let (t, b) = roofline(0.0, cast_bytes, 1.0, self.mem_bw);
        self.push(
            out,
            cast_name,
            Category::Dequant,
            0.0,
            cast_bytes,
            t,
            b,
            1,
            None,
        );
        (elems * 2.0, FormatKind::Bf16)
    }

    /// A weight GEMM: `m` tokens × (`k` → `n`) with weights stored as `fmt` (`n × k`
    /// elements on this GPU). Pushes a separate cast pass first when the engine does not
    /// fuse this format's dequantization.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        out: &mut Vec<OpCost>,
        name: &'static str,
        cat: Category,
        m: f64,
        n: f64,
        k: f64,
        fmt: WeightFormat,
        kernels: u32,
    ) {
        let (weight_bytes, kind) = self.weights_read(out, "dequant_cast", n * k, fmt);
        let math = self.math_of(kind);
        let flops = 2.0 * m * n * k;
        let bytes = weight_bytes + (m * k + m * n) * 2.0;
        let (t, b) = roofline(
            flops,
            bytes,
            self.peak(math) * self.params.gemm(kind),
            self.mem_bw,
        );
        self.push(
            out,
            name,
            cat,
            flops,
            bytes,
            t,
            b,
            kernels,
            Some(math.name()),
        );
    }

    /// A memory-bound elementwise op (norm, activation, rotary, top-k).
    pub fn elementwise(
        &self,
        out: &mut Vec<OpCost>,
        name: &'static str,
        cat: Category,
        bytes: f64,
        flops: f64,
        kernels: u32,
    ) {
        let (t, b) = roofline(flops, bytes, self.peak(MathDtype::Bf16), self.mem_bw);
        self.push(out, name, cat, flops, bytes, t, b, kernels, None);
    }

    pub fn collective(
        &self,
        out: &mut Vec<OpCost>,
        name: &'static str,
        cat: Category,
        c: CollectiveCost,
        bytes: f64,
    ) {
        if c.time() <= 0.0 {
            return;
        }
        let bound = if c.latency >= c.transfer {
            Bound::Latency
        } else {
            Bound::Link
        };
        self.push(out, name, cat, 0.0, bytes, c.time(), bound, 1, None);
    }

    /// Attention kernel over the KV cache.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_kernel(
        &self,
        out: &mut Vec<OpCost>,
        name: &'static str,
        flops: f64,
        bytes: f64,
        kernels: u32,
    ) {
        let peak = self.peak(MathDtype::Bf16) * self.params.attention_efficiency;
        let (t, b) = roofline(flops, bytes, peak, self.mem_bw);
        self.push(
            out,
            name,
            Category::Attention,
            flops,
            bytes,
            t,
            b,
            kernels,
            Some("bf16"),
        );
    }

    /// Routed experts as the fused MoE kernel runs them: every touched local expert's weights
    /// are read once; each routed token does 3 GEMV/GEMMs through its expert's slice.
    #[allow(clippy::too_many_arguments)]
    pub fn moe_experts(
        &self,
        out: &mut Vec<OpCost>,
        touched: f64,
        expert_elems: f64,
        routed_tokens: f64,
        h: f64,
        ie_local: f64,
        fmt: WeightFormat,
    ) {
        let (weight_bytes, kind) =
            self.weights_read(out, "experts_dequant_cast", touched * expert_elems, fmt);
        let math = self.math_of(kind);
        let flops = 2.0 * routed_tokens * expert_elems;
        let act_bytes = routed_tokens * (2.0 * h + 3.0 * ie_local) * 2.0;
        let (t, b) = roofline(
            flops,
            weight_bytes + act_bytes,
            self.peak(math) * self.params.gemm(kind),
            self.mem_bw,
        );
        // align/sort, gate_up, activation, down, weighted sum
        self.push(
            out,
            "routed_experts",
            Category::Moe,
            flops,
            weight_bytes + act_bytes,
            t,
            b,
            5,
            Some(math.name()),
        );
    }
}

impl<'a> Evaluator<'a> {
    pub fn new(
        model: &'a ModelSpec,
        system: &'a System,
        par: Parallel,
        params: CostParams,
    ) -> Result<Self> {
        par.validate(model, system)?;
        let mut classes: Vec<LayerClass> = Vec::new();
        let mut layer_class = Vec::with_capacity(model.config.num_hidden_layers as usize);
        let dense = model.dense_layers();
        for i in 0..model.config.num_hidden_layers {
            let c = LayerClass {
                moe: i >= dense,
                window: model.window_of_layer(i),
            };
            let idx = match classes.iter().position(|x| *x == c) {
                Some(p) => p,
                None => {
                    classes.push(c);
                    classes.len() - 1
                }
            };
            layer_class.push(idx);
        }
        Ok(Evaluator {
            model,
            system,
            par,
            params,
            device: Device::new(system, params),
            classes,
            layer_class,
        })
    }

    /// Operators of one layer of `class` for `pass`, on one GPU.
    fn layer_ops(&self, class: LayerClass, pass: &Pass, out: &mut Vec<OpCost>) {
        let m = self.model;
        let c = &m.config;
        let q = &m.quantization;
        let par = &self.par;
        let tp = par.tp as f64;
        let dp = par.dp as f64;
        let h = c.hidden_size as f64;
        let heads = c.num_attention_heads as f64 / tp;
        let kvb = q.kv_cache.bytes();
        let seqs = pass.sequences / dp;
        // Rows of every GEMM, norm and all-reduce: own tokens plus mixed-in prompt tokens.
        let tokens = pass.all_tokens() / dp;
        // Tokens that attend over the cached context (the pass's own).
        let own = pass.tokens() / dp;
        let mixed = pass.mixed_prefill_tokens / dp;
        // Mixed-in prompt tokens attend causally within their own prompt.
        let mixed_span = (pass.mixed_prefill_len + 1.0) / 2.0;
        let new = pass.tokens_per_sequence;
        // Mean positions each new token attends to (causal among the new tokens).
        let span = pass.context + (new + 1.0) / 2.0;
        let cached = pass.context + new;
        let attn_fmt = q.attention();

        self.device.elementwise(
            out,
            "input_layernorm",
            Category::Other,
            tokens * h * 2.0 * 3.0,
            tokens * h * 4.0,
            1,
        );
        match m.attention() {
            Attention::Mla {
                q_lora_rank,
                kv_lora_rank,
                nope,
                rope,
                v,
            } => {
                let (kv, nope, rope, v) = (kv_lora_rank as f64, nope as f64, rope as f64, v as f64);
                // Low-rank down-projections, replicated on every rank; the query's only when
                // the model has a query rank (else its projection is full-rank and sharded).
                if let Some(r) = q_lora_rank {
                    self.device.gemm(
                        out,
                        "q_a_proj",
                        Category::Gemm,
                        tokens,
                        r as f64,
                        h,
                        attn_fmt,
                        1,
                    );
                }
                self.device.gemm(
                    out,
                    "kv_a_proj_with_mqa",
                    Category::Gemm,
                    tokens,
                    kv + rope,
                    h,
                    attn_fmt,
                    1,
                );
                let (norm, width, kernels) = match q_lora_rank {
                    Some(r) => ("q_kv_a_layernorm", r as f64 + kv, 2),
                    None => ("kv_a_layernorm", kv, 1),
                };
                self.device.elementwise(
                    out,
                    norm,
                    Category::Other,
                    tokens * width * 2.0 * 2.0,
                    tokens * width * 4.0,
                    kernels,
                );
                match q_lora_rank {
                    Some(r) => self.device.gemm(
                        out,
                        "q_b_proj",
                        Category::Gemm,
                        tokens,
                        heads * (nope + rope),
                        r as f64,
                        attn_fmt,
                        1,
                    ),
                    None => self.device.gemm(
                        out,
                        "q_proj",
                        Category::Gemm,
                        tokens,
                        heads * (nope + rope),
                        h,
                        attn_fmt,
                        1,
                    ),
                }
                self.device.elementwise(
                    out,
                    "rotary_emb",
                    Category::Other,
                    tokens * (heads + 1.0) * rope * 2.0 * 2.0,
                    tokens * heads * rope * 6.0,
                    1,
                );
                // DSA: attend only to the indexer's top-k positions, after the indexer scores all.
                let (span_eff, cached_eff) = match c.index_topk {
                    Some(k) => {
                        let k = k as f64;
                        let ih = c.index_n_heads.unwrap_or(64) as f64;
                        let id = c.index_head_dim.unwrap_or(128) as f64;
                        let flops =
                            2.0 * own * ih * cached * id + 2.0 * mixed * ih * mixed_span * id;
                        let bytes =
                            seqs * cached * id * kvb + mixed * id * kvb + tokens * ih * id * 2.0;
                        self.device
                            .attention_kernel(out, "dsa_indexer", flops, bytes, 2);
                        (span.min(k), cached.min(k + new))
                    }
                    None => (span, cached),
                };
                match pass.phase {
                    Phase::Decode => {
                        // Absorbed form: attention in the 512+64 latent space, W_UK / W_UV
                        // folded into per-head batched matmuls.
                        self.device.gemm(
                            out,
                            "w_uk_absorbed",
                            Category::Gemm,
                            own,
                            heads * kv,
                            nope,
                            attn_fmt,
                            1,
                        );
                        let flops = 2.0 * own * heads * span_eff * (kv + rope)
                            + 2.0 * own * heads * span_eff * kv;
                        let bytes = seqs * cached_eff * (kv + rope) * kvb
                            + own * (kv + rope) * kvb
                            + own * heads * (2.0 * kv + rope) * 2.0;
                        self.device
                            .attention_kernel(out, "mla_decode_attention", flops, bytes, 3);
                        self.device.gemm(
                            out,
                            "w_uv_absorbed",
                            Category::Gemm,
                            own,
                            heads * v,
                            kv,
                            attn_fmt,
                            1,
                        );
                        if mixed > 0.0 {
                            // Mixed-in prompts: expanded form over their own tokens.
                            self.device.gemm(
                                out,
                                "kv_b_proj_prefill",
                                Category::Gemm,
                                mixed,
                                heads * (nope + v),
                                kv,
                                attn_fmt,
                                1,
                            );
                            let flops = 2.0 * mixed * heads * mixed_span * (nope + rope + v);
                            let bytes = mixed * heads * (nope + rope + v) * 2.0 * 2.0
                                + mixed * (kv + rope) * kvb;
                            self.device.attention_kernel(
                                out,
                                "mla_prefill_attention",
                                flops,
                                bytes,
                                2,
                            );
                        }
                    }
                    Phase::Prefill => {
                        // Expanded form: kv_b_proj materialises per-head K/V for every cached token.
                        let rows = seqs * cached;
                        self.device.gemm(
                            out,
                            "kv_b_proj",
                            Category::Gemm,
                            rows,
                            heads * (nope + v),
                            kv,
                            attn_fmt,
                            1,
                        );
                        let flops = 2.0 * own * heads * span_eff * (nope + rope + v);
                        let bytes = rows * heads * (nope + rope + v) * 2.0
                            + own * heads * (nope + rope + v) * 2.0
                            + own * (kv + rope) * kvb;
                        self.device
                            .attention_kernel(out, "mla_prefill_attention", flops, bytes, 2);
                    }
                }
                self.device.gemm(
                    out,
                    "o_proj",
                    Category::Gemm,
                    tokens,
                    h,
                    heads * v,
                    attn_fmt,
                    1,
                );
            }
            Attention::Gqa { kv_heads, head_dim } => {
                let d = head_dim as f64;
                let kv_local = (kv_heads as f64 / tp).max(1.0);
                self.device.gemm(
                    out,
                    "qkv_proj",
                    Category::Gemm,
                    tokens,
                    (heads + 2.0 * kv_local) * d,
                    h,
                    attn_fmt,
                    1,
                );
                self.device.elementwise(
                    out,
                    "rotary_emb",
                    Category::Other,
                    tokens * (heads + kv_local) * d * 2.0 * 2.0,
                    tokens * (heads + kv_local) * d * 3.0,
                    1,
                );
                let (span_eff, cached_eff) = match class.window {
                    Some(w) => (span.min(w as f64), cached.min(w as f64 + new)),
                    None => (span, cached),
                };
                let mixed_eff = match class.window {
                    Some(w) => mixed_span.min(w as f64),
                    None => mixed_span,
                };
                let flops = 4.0 * own * heads * span_eff * d + 4.0 * mixed * heads * mixed_eff * d;
                let bytes = seqs * cached_eff * 2.0 * kv_local * d * kvb
                    + tokens * 2.0 * kv_local * d * kvb
                    + tokens * heads * d * 2.0 * 2.0;
                let name = match pass.phase {
                    Phase::Decode => "decode_attention",
                    Phase::Prefill => "prefill_attention",
                };
                self.device.attention_kernel(out, name, flops, bytes, 2);
                self.device.gemm(
                    out,
                    "o_proj",
                    Category::Gemm,
                    tokens,
                    h,
                    heads * d,
                    attn_fmt,
                    1,
                );
            }
        }
        let ar_bytes = tokens * h * 2.0;
        self.device.collective(
            out,
            "allreduce_attn",
            Category::Allreduce,
            collective::allreduce(self.system, ar_bytes, par.tp, &self.params),
            ar_bytes,
        );
        self.device.elementwise(
            out,
            "post_attention_layernorm",
            Category::Other,
            tokens * h * 2.0 * 3.0,
            tokens * h * 4.0,
            1,
        );

        match (class.moe, m.moe()) {
            (true, Some(moe)) => {
                let e = moe.experts as f64;
                let k = moe.top_k as f64;
                let ie = moe.expert_intermediate as f64;
                self.device.gemm(
                    out,
                    "router_gate",
                    Category::Moe,
                    tokens,
                    e,
                    h,
                    q.router(),
                    1,
                );
                self.device.elementwise(
                    out,
                    "router_topk",
                    Category::Moe,
                    tokens * e * 4.0 * 2.0,
                    tokens * e * 8.0,
                    2,
                );
                // Tokens of every data-parallel replica reach the experts.
                let all_tokens = pass.all_tokens();
                let ep = par.ep as f64;
                let moe_tp = par.moe_tp() as f64;
                let local_experts = e / ep;
                let touched = expected_experts_touched(e, k, all_tokens) / ep;
                let routed_tokens = all_tokens * k / ep;
                let fmt = q.routed_experts();
                let expert_elems = 3.0 * h * ie / moe_tp;
                self.device.moe_experts(
                    out,
                    touched.min(local_experts),
                    expert_elems,
                    routed_tokens,
                    h,
                    ie / moe_tp,
                    fmt,
                );
                if moe.shared > 0 {
                    let si = ie * moe.shared as f64 / tp;
                    self.device.gemm(
                        out,
                        "shared_gate_up",
                        Category::Moe,
                        tokens,
                        2.0 * si,
                        h,
                        q.shared_experts(),
                        1,
                    );
                    self.device.elementwise(
                        out,
                        "shared_act",
                        Category::Moe,
                        tokens * si * 2.0 * 3.0,
                        tokens * si * 4.0,
                        1,
                    );
                    self.device.gemm(
                        out,
                        "shared_down",
                        Category::Moe,
                        tokens,
                        h,
                        si,
                        q.shared_experts(),
                        1,
                    );
                }
                if par.dp > 1 {
                    let n = par.tp * par.dp;
                    let bytes = tokens * k.min(ep) * h * 2.0;
                    let c = collective::all_to_all(self.system, bytes, n, &self.params);
                    self.device
                        .collective(out, "moe_dispatch", Category::Alltoall, c, bytes);
                    self.device
                        .collective(out, "moe_combine", Category::Alltoall, c, bytes);
                } else {
                    let c = collective::allreduce(self.system, ar_bytes, par.tp, &self.params);
                    self.device
                        .collective(out, "allreduce_moe", Category::Allreduce, c, ar_bytes);
                }
            }
            _ => {
                let i = c.intermediate_size.unwrap_or(0) as f64 / tp;
                let fmt = q.dense_mlp();
                self.device.gemm(
                    out,
                    "gate_up_proj",
                    Category::Gemm,
                    tokens,
                    2.0 * i,
                    h,
                    fmt,
                    1,
                );
                self.device.elementwise(
                    out,
                    "act_and_mul",
                    Category::Other,
                    tokens * i * 2.0 * 3.0,
                    tokens * i * 4.0,
                    1,
                );
                self.device
                    .gemm(out, "down_proj", Category::Gemm, tokens, h, i, fmt, 1);
                self.device.collective(
                    out,
                    "allreduce_mlp",
                    Category::Allreduce,
                    collective::allreduce(self.system, ar_bytes, par.tp, &self.params),
                    ar_bytes,
                );
            }
        }
    }

    /// Operators that run once per pass: embedding, final norm, lm_head, logits gather,
    /// sampling.
    fn head_ops(&self, pass: &Pass, out: &mut Vec<OpCost>) {
        let m = self.model;
        let c = &m.config;
        let q = &m.quantization;
        let tp = self.par.tp;
        let h = c.hidden_size as f64;
        let vocab = c.vocab_size as f64;
        let dp = self.par.dp as f64;
        let tokens = pass.all_tokens() / dp;
        // Only the last position of each prompt is sampled in prefill; every new token is
        // scored in decode and verify.
        let mixed_prompts = if pass.mixed_prefill_tokens > 0.0 {
            pass.mixed_prefill_tokens / pass.mixed_prefill_len
        } else {
            0.0
        };
        let rows = match pass.phase {
            Phase::Decode => pass.tokens() / dp,
            Phase::Prefill => pass.sequences / dp,
        } + mixed_prompts / dp;
        self.device.elementwise(
            out,
            "embedding",
            Category::Other,
            tokens * h * 2.0 * 2.0,
            0.0,
            1,
        );
        let ar = tokens * h * 2.0;
        self.device.collective(
            out,
            "allreduce_embedding",
            Category::Allreduce,
            collective::allreduce(self.system, ar, tp, &self.params),
            ar,
        );
        self.device.elementwise(
            out,
            "final_norm",
            Category::Other,
            rows * h * 2.0 * 3.0,
            rows * h * 4.0,
            1,
        );
        self.device.gemm(
            out,
            "lm_head",
            Category::Gemm,
            rows,
            vocab / tp as f64,
            h,
            q.lm_head(),
            1,
        );
        if tp > 1 {
            let bytes = rows * vocab * 2.0 * (tp as f64 - 1.0) / tp as f64;
            self.device.collective(
                out,
                "logits_gather",
                Category::Other,
                collective::send_recv(self.system, bytes, &self.params),
                bytes,
            );
        }
        self.device.elementwise(
            out,
            "sampling",
            Category::Other,
            rows * vocab * 4.0 * 2.0,
            rows * vocab * 6.0,
            3,
        );
    }

    /// Evaluate one forward pass.
    pub fn evaluate(&self, pass: &Pass) -> StepCost {
        let pp = self.par.pp.max(1);
        // Pipelining: up to `pp` micro-batches in flight, each with an equal share.
        let micro = if pp > 1 {
            (pass.sequences.floor().max(1.0)).min(pp as f64)
        } else {
            1.0
        };
        let mpass = Pass {
            sequences: pass.sequences / micro,
            mixed_prefill_tokens: pass.mixed_prefill_tokens / micro,
            ..*pass
        };
        let mut classes = Vec::with_capacity(self.classes.len());
        for &class in &self.classes {
            let mut ops = Vec::with_capacity(32);
            self.layer_ops(class, &mpass, &mut ops);
            let mut b = Breakdown::default();
            for o in &ops {
                b.add(o.category, o.time);
                b.add(Category::Overhead, o.overhead);
            }
            classes.push(ClassCost {
                class,
                ops,
                breakdown: b,
            });
        }
        let mut head = Vec::with_capacity(8);
        self.head_ops(&mpass, &mut head);
        let mut head_b = Breakdown::default();
        for o in &head {
            head_b.add(o.category, o.time);
            head_b.add(Category::Overhead, o.overhead);
        }

        // One micro-batch through every stage in turn.
        let mut chain = head_b;
        let layers = self.layer_class.len();
        let per_stage = layers.div_ceil(pp as usize);
        let mut max_stage = 0.0f64;
        for s in 0..pp as usize {
            let lo = s * per_stage;
            let hi = ((s + 1) * per_stage).min(layers);
            let mut st = 0.0;
            for i in lo..hi {
                let cb = &classes[self.layer_class[i]].breakdown;
                chain = chain.plus(cb);
                st += cb.total();
            }
            if s == 0 || s == pp as usize - 1 {
                st += head_b.total() / if pp == 1 { 1.0 } else { 2.0 };
            }
            max_stage = max_stage.max(st);
        }
        if pp > 1 {
            let bytes = mpass.all_tokens() / self.par.dp as f64
                * self.model.config.hidden_size as f64
                * 2.0;
            let hop = collective::send_recv(self.system, bytes, &self.params).time();
            chain.add(Category::Pipeline, hop * (pp - 1) as f64);
            // Other micro-batches occupy the stages: a token waits for them.
            let cycle = (micro * max_stage).max(chain.total());
            chain.add(Category::Pipeline, cycle - chain.total());
        }
        chain.add(Category::Overhead, self.params.step_overhead);
        StepCost {
            pass: *pass,
            total: chain.total(),
            breakdown: chain,
            classes,
            layer_class: self.layer_class.clone(),
            head,
        }
    }

    /// Time of one pass, seconds (the same number as `evaluate(..).total`).
    pub fn step_time(&self, pass: &Pass) -> f64 {
        self.evaluate(pass).total
    }
}
