//! A forward pass priced: the sum of its blocks' operators over the layers and pipeline
//! stages.
//!
//! The [`LayerPlan`] is compiled once per (model, layout); each evaluation builds the
//! operators of every distinct block for the pass, prices them, and multiplies by the layers
//! that run the block. Within a block, the operators that read the cached context
//! (attention kernels) are summed apart from the rest, so a grid over contexts at one batch
//! ([`Evaluator::decode_times`]) re-prices only those and gives the same numbers as a full
//! evaluation. Pipeline stages run in sequence for one micro-batch and overlap across
//! micro-batches.

use crate::cost::breakdown::{Breakdown, OpCost};
use crate::cost::collective;
use crate::cost::device::Device;
use crate::cost::params::CostParams;
use crate::cost::power::Work;
use crate::cost::price::{add_to, cost_with, CollectiveMemo};
use crate::error::Result;
use crate::ops::{
    BlockKind, BuildContext, Category, Fusion, LayerPlan, Operator, Parallel, Pass, Phase,
};
use crate::spec::engine::GraphCounts;
use crate::spec::{FormatKind, ModelSpec, System, WeightFormat};
use std::cell::RefCell;
use std::sync::OnceLock;

/// One block kind priced for a pass, per GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockCost {
    pub kind: BlockKind,
    /// The block's operators as data, in the order they run.
    pub operators: Vec<Operator>,
    /// Their prices, one per operator.
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
    /// Per distinct block kind (for one micro-batch when pipelined).
    pub blocks: Vec<BlockCost>,
    /// (attention block, feed-forward block) of every layer, indices into `blocks`.
    pub layers: Vec<(usize, usize)>,
    /// Operators that run once per pass (embedding, lm_head, sampling, ...), as data.
    pub head_operators: Vec<Operator>,
    /// Their prices.
    pub head: Vec<OpCost>,
}

impl StepCost {
    /// Layers that run block `b`.
    pub fn block_count(&self, b: usize) -> u32 {
        block_count(&self.layers, b)
    }

    /// Every operator of the pass with the number of times it runs on the busiest GPU chain.
    pub fn ops_with_counts(&self) -> Vec<(OpCost, u32)> {
        let mut v = Vec::new();
        for (bi, b) in self.blocks.iter().enumerate() {
            let n = self.block_count(bi);
            v.extend(b.ops.iter().map(|o| (*o, n)));
        }
        v.extend(self.head.iter().map(|o| (*o, 1)));
        v
    }

    /// Every operator as data with its price, the block it belongs to (`None`: the head)
    /// and how many times it runs per pass, in the order a layer runs them.
    pub fn operators(&self) -> Vec<(Option<BlockKind>, Operator, OpCost, u32)> {
        let mut v = Vec::new();
        for (bi, b) in self.blocks.iter().enumerate() {
            let n = self.block_count(bi);
            v.extend(
                b.operators
                    .iter()
                    .zip(&b.ops)
                    .map(|(o, c)| (Some(b.kind), *o, *c, n)),
            );
        }
        v.extend(
            self.head_operators
                .iter()
                .zip(&self.head)
                .map(|(o, c)| (None, *o, *c, 1)),
        );
        v
    }

    /// Time per category of layer `i` (one micro-batch).
    pub fn layer_breakdown(&self, i: usize) -> Breakdown {
        let (a, f) = self.layers[i];
        self.blocks[a].breakdown.plus(&self.blocks[f].breakdown)
    }

    /// Time of layer `i` (one micro-batch), seconds.
    pub fn layer_time(&self, i: usize) -> f64 {
        self.layer_breakdown(i).total()
    }
}

/// Layers of `layers` ((attention, feed-forward) block indices) that run block `b`.
fn block_count(layers: &[(usize, usize)], b: usize) -> u32 {
    layers.iter().filter(|(a, f)| *a == b || *f == b).count() as u32
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
    /// The same GPU with kernels launched eagerly, for passes beyond the engine's CUDA-graph
    /// capture sizes: made the first time such a pass is priced (most evaluators never
    /// price one).
    eager: OnceLock<Device<'a>>,
    pub plan: LayerPlan,
    /// Formats the engine dequantizes in a separate pass.
    unfused: Vec<FormatKind>,
    /// Work the kernels fold into one another (`ops::Fusion`).
    fusion: Fusion,
    /// Distinct (attention, feed-forward) pairs and how many layers run each (pp = 1).
    layer_kinds: Vec<((usize, usize), f64)>,
    /// Layers that run each block kind (`StepCost::block_count`), for the work of a pass.
    block_counts: Vec<f64>,
}

/// Buffers reused by the evaluations that keep no per-operator record.
#[derive(Default)]
struct Buffers {
    ops: Vec<Operator>,
    splits: Vec<Split>,
    blocks: Vec<Breakdown>,
}

thread_local! {
    static BUF: RefCell<Buffers> = RefCell::new(Buffers::default());
}

/// A block's time split into what reads the cached context and what does not, and, where
/// asked, the work of each part (`power::Work`).
#[derive(Debug, Clone, Copy, Default)]
struct Split {
    context_free: Breakdown,
    context: Breakdown,
    context_free_work: Work,
    context_work: Work,
}

impl Split {
    fn total(&self) -> Breakdown {
        self.context_free.plus(&self.context)
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
        let plan = LayerPlan::new(model);
        let mut layer_kinds: Vec<((usize, usize), f64)> = Vec::new();
        for l in &plan.layers {
            match layer_kinds.iter_mut().find(|(k, _)| k == l) {
                Some((_, n)) => *n += 1.0,
                None => layer_kinds.push((*l, 1.0)),
            }
        }
        let block_counts = (0..plan.blocks.len())
            .map(|b| block_count(&plan.layers, b) as f64)
            .collect();
        let device = Device::new(system, params)?;
        let unfused = system.engine.unfused_dequant.clone();
        let fusion = fusion(model, &device, &unfused);
        Ok(Evaluator {
            model,
            system,
            par,
            params,
            device,
            eager: OnceLock::new(),
            plan,
            // The same operators at every parameter set: at the speed of light a cast pass
            // is priced as fused (free).
            unfused,
            fusion,
            layer_kinds,
            block_counts,
        })
    }

    /// The pass one micro-batch runs: with pipelining, up to `pp` micro-batches are in
    /// flight, each with an equal share. A mean (fractional) count of sequences, as the
    /// serving loop's decode batch is, gives a fractional count of micro-batches, so the
    /// step grows continuously with the batch (a floor made it fall between whole counts).
    fn micro_batch(&self, pass: &Pass) -> (f64, Pass) {
        let pp = self.par.pp.max(1);
        let micro = if pp > 1 {
            pass.sequences.clamp(1.0, pp as f64)
        } else {
            1.0
        };
        let mpass = Pass {
            sequences: pass.sequences / micro,
            mixed_prefill_tokens: pass.mixed_prefill_tokens / micro,
            ..*pass
        };
        (micro, mpass)
    }

    fn context(&self, pass: Pass) -> BuildContext<'_> {
        BuildContext::new(self.model, self.par, &self.unfused, pass)
            .with_fusion(self.fusion)
            .with_moe_all_to_all(self.system.engine.moe_all_to_all)
    }

    /// The operators of one block kind for `pass` (one micro-batch), as data.
    pub fn block_ops(&self, kind: BlockKind, pass: &Pass) -> Vec<Operator> {
        let mut v = Vec::new();
        self.context(self.micro_batch(pass).1)
            .block_ops(kind, &mut v);
        v
    }

    /// The operators that run once per pass, as data.
    pub fn head_ops(&self, pass: &Pass) -> Vec<Operator> {
        let mut v = Vec::new();
        self.context(self.micro_batch(pass).1).head_ops(&mut v);
        v
    }

    /// The GPU as a pass of `cx` runs on it: replayed from a CUDA graph, or launched eagerly
    /// when its batch per replica exceeds the engine's largest captured one (in tokens, or
    /// for a decode pass in sequences where the engine captures per batch size).
    fn device_for(&self, cx: &BuildContext) -> &Device<'a> {
        let engine = &self.system.engine;
        let per_sequence = engine.cuda_graph_counts == GraphCounts::Sequences
            && cx.pass.phase == Phase::Decode
            && cx.mixed == 0.0;
        let batch = if per_sequence { cx.seqs } else { cx.tokens };
        match engine.cuda_graph_max_tokens {
            Some(max) if self.device.graphs && batch > max as f64 => {
                self.eager.get_or_init(|| self.device.eager())
            }
            _ => &self.device,
        }
    }

    /// Price `ops` of a pass of `cx` into a split breakdown, keeping the priced records when
    /// `keep` is given and summing their work when `work` is set.
    fn price(
        &self,
        cx: &BuildContext,
        ops: &[Operator],
        memo: &mut CollectiveMemo,
        keep: Option<&mut Vec<OpCost>>,
        work: bool,
    ) -> Split {
        let mut s = Split::default();
        let mut keep = keep;
        let dev = self.device_for(cx);
        for op in ops {
            let c = cost_with(op, dev, memo);
            let (into, w) = if op.reads_context() {
                (&mut s.context, &mut s.context_work)
            } else {
                (&mut s.context_free, &mut s.context_free_work)
            };
            add_to(into, &c);
            if work {
                w.add(&c, 1.0, &self.system.gpu);
            }
            if let Some(k) = keep.as_deref_mut() {
                k.push(c);
            }
        }
        s
    }

    /// Evaluate one forward pass, keeping every priced operator.
    pub fn evaluate(&self, pass: &Pass) -> StepCost {
        let (micro, mpass) = self.micro_batch(pass);
        let cx = self.context(mpass);
        let mut memo = CollectiveMemo::default();
        let mut ops = Vec::with_capacity(32);
        let blocks: Vec<BlockCost> = self
            .plan
            .blocks
            .iter()
            .map(|&kind| {
                ops.clear();
                cx.block_ops(kind, &mut ops);
                let mut priced = Vec::with_capacity(ops.len());
                let b = self
                    .price(&cx, &ops, &mut memo, Some(&mut priced), false)
                    .total();
                BlockCost {
                    kind,
                    operators: ops.clone(),
                    ops: priced,
                    breakdown: b,
                }
            })
            .collect();
        ops.clear();
        cx.head_ops(&mut ops);
        let mut head = Vec::with_capacity(ops.len());
        let head_b = self
            .price(&cx, &ops, &mut memo, Some(&mut head), false)
            .total();
        let bs: Vec<Breakdown> = blocks.iter().map(|b| b.breakdown).collect();
        let breakdown = self.combine(&bs, head_b, micro, &mpass);
        StepCost {
            pass: *pass,
            total: breakdown.total(),
            breakdown,
            blocks,
            layers: self.plan.layers.clone(),
            head_operators: ops,
            head,
        }
    }

    /// Time of one pass, seconds (the same number as `evaluate(..).total`), without keeping
    /// per-operator records.
    pub fn step_time(&self, pass: &Pass) -> f64 {
        self.step_breakdown(pass).total()
    }

    /// Time per category of one pass (the same as `evaluate(..).breakdown`).
    pub fn step_breakdown(&self, pass: &Pass) -> Breakdown {
        let (micro, mpass) = self.micro_batch(pass);
        let cx = self.context(mpass);
        BUF.with(|b| {
            let b = &mut *b.borrow_mut();
            let (head, _) = self.price_blocks(&cx, b, false);
            b.blocks.clear();
            b.blocks.extend(b.splits.iter().map(Split::total));
            self.combine(&b.blocks, head, micro, &mpass)
        })
    }

    /// Price every block kind and the head for `cx` into `b.splits` (one per block kind), and
    /// return the head's breakdown and (with `work`) its work.
    fn price_blocks(&self, cx: &BuildContext, b: &mut Buffers, work: bool) -> (Breakdown, Work) {
        let mut memo = CollectiveMemo::default();
        b.splits.clear();
        for &kind in &self.plan.blocks {
            b.ops.clear();
            cx.block_ops(kind, &mut b.ops);
            b.splits.push(self.price(cx, &b.ops, &mut memo, None, work));
        }
        b.ops.clear();
        cx.head_ops(&mut b.ops);
        let head = self.price(cx, &b.ops, &mut memo, None, work);
        (head.total(), head.context_free_work.plus(head.context_work))
    }

    /// Decode-step times (seconds) of `batch` sequences at each of `contexts`, written to
    /// `out`: what does not read the context is priced once, attention per context. Equal to
    /// `step_time(&Pass::decode(batch, c))` for every `c`.
    pub fn decode_times(&self, batch: f64, contexts: &[f64], out: &mut Vec<f64>) {
        self.decode_points(batch, contexts, out, None);
    }

    /// [`Self::decode_times`], and with `work` the work each step asks of one GPU, the same
    /// as `power::Work::of(&self.evaluate(&Pass::decode(batch, c)), gpu)` (one micro-batch
    /// through every layer, summed per block kind rather than per operator).
    pub fn decode_points(
        &self,
        batch: f64,
        contexts: &[f64],
        out: &mut Vec<f64>,
        mut work: Option<&mut Vec<Work>>,
    ) {
        out.clear();
        if let Some(w) = work.as_deref_mut() {
            w.clear();
        }
        let Some(&first) = contexts.first() else {
            return;
        };
        let want = work.is_some();
        let gpu = &self.system.gpu;
        let (micro, mpass) = self.micro_batch(&Pass::decode(batch, first));
        BUF.with(|b| {
            let b = &mut *b.borrow_mut();
            let (head, head_work) = self.price_blocks(&self.context(mpass), b, want);
            // The work no context changes: the head, every block's context-free operators,
            // and the context-reading ones of blocks that are not attention (priced once).
            let mut fixed = head_work;
            for (i, &kind) in self.plan.blocks.iter().enumerate() {
                let sp = &b.splits[i];
                let w = if matches!(kind, BlockKind::Attention { .. }) {
                    sp.context_free_work
                } else {
                    sp.context_free_work.plus(sp.context_work)
                };
                fixed = fixed.plus(w.scaled(self.block_counts[i]));
            }
            b.blocks.clear();
            b.blocks
                .resize(self.plan.blocks.len(), Breakdown::default());
            let mut memo = CollectiveMemo::default();
            for &c in contexts {
                let pass = Pass {
                    context: c,
                    ..mpass
                };
                let cx = self.context(pass);
                let mut step_work = fixed;
                for (i, &kind) in self.plan.blocks.iter().enumerate() {
                    let context = if matches!(kind, BlockKind::Attention { .. }) {
                        b.ops.clear();
                        cx.block_ops(kind, &mut b.ops);
                        let mut bd = Breakdown::default();
                        let mut w = Work::default();
                        for op in b.ops.iter().filter(|o| o.reads_context()) {
                            let priced = cost_with(op, self.device_for(&cx), &mut memo);
                            add_to(&mut bd, &priced);
                            if want {
                                w.add(&priced, 1.0, gpu);
                            }
                        }
                        step_work = step_work.plus(w.scaled(self.block_counts[i]));
                        bd
                    } else {
                        b.splits[i].context
                    };
                    b.blocks[i] = b.splits[i].context_free.plus(&context);
                }
                out.push(self.combine(&b.blocks, head, micro, &pass).total());
                if let Some(w) = work.as_deref_mut() {
                    w.push(step_work);
                }
            }
        })
    }

    /// One pass from its blocks' and head's breakdowns: one micro-batch through every stage
    /// in turn, the pipeline's transfers and waits, and the engine's per-step cost.
    fn combine(
        &self,
        blocks: &[Breakdown],
        head: Breakdown,
        micro: f64,
        mpass: &Pass,
    ) -> Breakdown {
        let pp = self.par.pp.max(1);
        let mut chain = head;
        if pp == 1 {
            for &((a, f), n) in &self.layer_kinds {
                chain = chain.plus(&blocks[a].plus(&blocks[f]).scaled(n));
            }
        } else {
            let layers = &self.plan.layers;
            let per_stage = layers.len().div_ceil(pp as usize);
            let mut max_stage = 0.0f64;
            for s in 0..pp as usize {
                let lo = (s * per_stage).min(layers.len());
                let hi = ((s + 1) * per_stage).min(layers.len());
                let mut st = 0.0;
                for &(a, f) in &layers[lo..hi] {
                    let lb = blocks[a].plus(&blocks[f]);
                    chain = chain.plus(&lb);
                    st += lb.total();
                }
                if s == 0 || s == pp as usize - 1 {
                    st += head.total() / 2.0;
                }
                max_stage = max_stage.max(st);
            }
            let bytes =
                mpass.replica_tokens(self.par.dp) * self.model.config.hidden_size as f64 * 2.0;
            // Stages fill nodes in order: the hops whose next stage starts a node cross
            // the network (on a multi-node system), the others stay inside a node.
            let stage = self.par.tp * self.par.dp;
            let g = self.system.spec.gpus_per_node();
            let crossing = match self.system.spec.nodes {
                Some(_) => (1..pp).filter(|s| (s * stage).is_multiple_of(g)).count() as f64,
                None => 0.0,
            };
            let within = collective::send_recv(self.system, bytes, &self.params).time();
            // Priced only where a hop crosses: one box's step stays as it was.
            let across = if crossing > 0.0 {
                collective::send_recv_over(self.system, bytes, &self.params, true).time()
            } else {
                0.0
            };
            chain.add(
                Category::Pipeline,
                within * ((pp - 1) as f64 - crossing) + across * crossing,
            );
            // Other micro-batches occupy the stages: a token waits for them.
            let cycle = (micro * max_stage).max(chain.total());
            chain.add(Category::Pipeline, cycle - chain.total());
        }
        chain.add(Category::Overhead, self.params.step_overhead);
        chain
    }
}

/// What `model`'s kernels fuse on `dev` with the engine's `unfused` cast formats: the routed
/// experts' fused-MoE family (the BF16 one after a cast pass) may pick the top-k itself, and
/// the engine may fold norms and RoPE into its all-reduce and attention kernels.
fn fusion(model: &ModelSpec, dev: &Device, unfused: &[FormatKind]) -> Fusion {
    let w = model.quantization.routed_experts();
    let kernel = if w.kind != FormatKind::Bf16 && unfused.contains(&w.kind) {
        WeightFormat::BF16
    } else {
        w
    };
    Fusion {
        moe_routing_inside: model.moe().is_some() && dev.moe_kernel(kernel).routing_inside,
        engine: dev.system.engine.fusion,
    }
}
