//! What is being evaluated: a parallel layout and the shape of one forward pass.

use crate::error::{Error, Result};
use crate::spec::engine::WeightBlockSplit;
use crate::spec::{Attention, ModelSpec, System, WeightFormat};
use serde::Serialize;
use std::fmt;

/// How the model is spread over GPUs. GPUs used = tp × dp × pp.
///
/// - `tp`: tensor parallel degree of attention and dense layers (heads and MLP columns split).
/// - `dp`: data-parallel attention replicas inside a pipeline stage (each runs its share of
///   the sequences; 1 = plain TP).
/// - `ep`: expert-parallel groups among the tp × dp GPUs of a stage; each group holds
///   `experts / ep` experts, tensor-split over the group's `tp × dp / ep` GPUs.
/// - `pp`: pipeline stages, each holding a contiguous block of layers.
/// - `redundant_experts`: extra expert slots per expert-parallel group for EPLB's replicas
///   of the busiest experts (`re` in a layout string: `tp1ep16dp16re2`). vLLM's and
///   SGLang's flags count them over all groups: `--eplb-config num_redundant_experts` /
///   `--ep-num-redundant-experts` = `redundant_experts × ep`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Parallel {
    pub tp: u32,
    pub ep: u32,
    pub pp: u32,
    pub dp: u32,
    #[serde(skip_serializing_if = "is_zero")]
    pub redundant_experts: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Parallel {
    pub fn tp(n: u32) -> Parallel {
        Parallel {
            tp: n,
            ep: 1,
            pp: 1,
            dp: 1,
            redundant_experts: 0,
        }
    }

    /// GPUs the layout occupies (saturating: a layout past `u32::MAX` GPUs fits no system,
    /// and must not wrap around to one that seems to).
    pub fn gpus(&self) -> u32 {
        self.tp.saturating_mul(self.dp).saturating_mul(self.pp)
    }

    /// Tensor-parallel degree inside one expert group.
    pub fn moe_tp(&self) -> u32 {
        (self.tp * self.dp / self.ep).max(1)
    }

    /// Expert slots over all expert-parallel groups: the model's `experts` and the
    /// redundant replicas EPLB places.
    pub fn expert_slots(&self, experts: f64) -> f64 {
        experts + (self.redundant_experts as f64) * self.ep as f64
    }

    /// Build from optional overrides: unspecified `tp` fills the system's GPUs.
    pub fn resolve(
        system: &System,
        tp: Option<u32>,
        ep: Option<u32>,
        pp: Option<u32>,
        dp: Option<u32>,
    ) -> Result<Parallel> {
        let n = system.spec.gpu_count;
        let pp = pp.unwrap_or(1);
        let dp = dp.unwrap_or(1);
        let ep = ep.unwrap_or(1);
        if pp == 0 || dp == 0 || ep == 0 || tp == Some(0) {
            return Err(Error::Scenario(
                "parallel degrees must be at least 1".into(),
            ));
        }
        let tp = match tp {
            Some(t) => t,
            None => {
                if !pp.checked_mul(dp).is_some_and(|g| n.is_multiple_of(g)) {
                    return Err(Error::Scenario(format!(
                        "pp {pp} × dp {dp} does not divide the system's {n} GPUs; give --tp explicitly"
                    )));
                }
                n / (pp * dp)
            }
        };
        Ok(Parallel {
            tp,
            ep,
            pp,
            dp,
            redundant_experts: 0,
        })
    }

    /// Check the layout against the model and system.
    pub fn validate(&self, model: &ModelSpec, system: &System) -> Result<()> {
        let bad = |m: String| Err(Error::Scenario(m));
        if self.gpus() > system.spec.gpu_count {
            return bad(format!(
                "layout {self} needs {} GPUs but system {} has {}",
                self.gpus(),
                system.spec.name,
                system.spec.gpu_count
            ));
        }
        // A weight format the GPU's engine has no kernel for, or no tensor-core path, is
        // refused, never priced at another format's kernel or another dtype's peak.
        crate::cost::device::check_formats_run(model, system)?;
        let heads = model.config.num_attention_heads;
        if !heads.is_multiple_of(self.tp) {
            return bad(format!(
                "tp {} does not divide the model's {heads} attention heads",
                self.tp
            ));
        }
        if let Attention::Gqa { kv_heads, .. } = model.attention() {
            if !kv_heads.is_multiple_of(self.tp) && !self.tp.is_multiple_of(kv_heads) {
                return bad(format!(
                    "tp {} and the model's {kv_heads} KV heads do not divide one another",
                    self.tp
                ));
            }
        }
        if self.pp > model.config.num_hidden_layers {
            return bad(format!(
                "pp {} exceeds the model's {} layers",
                self.pp, model.config.num_hidden_layers
            ));
        }
        if self.redundant_experts > 0 {
            let Some(m) = model.moe() else {
                return bad("redundant experts need a model with experts".into());
            };
            if self.ep < 2 {
                return bad(format!(
                    "{} redundant experts per group need expert parallelism: EPLB replicates \
                     experts across ep >= 2 groups (got ep {})",
                    self.redundant_experts, self.ep
                ));
            }
            let own = m.experts / self.ep.max(1);
            if self.redundant_experts > own {
                return bad(format!(
                    "{} redundant experts per group: at most one replica slot per expert a group \
                     holds ({own} = {} experts / ep {})",
                    self.redundant_experts, m.experts, self.ep
                ));
            }
        }
        if !(self.tp * self.dp).is_multiple_of(self.ep) {
            return bad(format!(
                "ep {} does not divide tp × dp = {}",
                self.ep,
                self.tp * self.dp
            ));
        }
        match model.moe() {
            Some(m) if !m.experts.is_multiple_of(self.ep) => {
                return bad(format!(
                    "ep {} does not divide the model's {} experts",
                    self.ep, m.experts
                ));
            }
            None if self.ep > 1 => return bad("ep > 1 needs a model with experts".into()),
            _ => {}
        }
        // DeepEP gives every GPU of the data-parallel group its own experts.
        let deepep = system.engine.moe_all_to_all.is_deepep();
        let group = self.tp.saturating_mul(self.dp);
        if deepep && self.dp > 1 && model.moe().is_some() && self.ep != group {
            return bad(format!(
                "engine.moe_all_to_all = \"{}\" runs pure expert parallelism over the data-parallel \
                 group: ep must equal tp × dp = {} (got ep {})",
                system.engine.moe_all_to_all.name(),
                group,
                self.ep
            ));
        }
        match system.engine.weight_block_split {
            WeightBlockSplit::WholeBlocks => self.check_weight_blocks(model, &system.engine.name),
            WeightBlockSplit::PartialBlocks => self.check_even_split(model),
        }
    }

    /// Block-scaled weights split across ranks must split into whole blocks: vLLM refuses
    /// a layout whose per-rank shard of a 128 x 128 block-scaled FP8 weight is not a
    /// multiple of 128 ("... is not divisible by weight quantization block_n = 128", the
    /// block-shape check of vLLM's FP8 linear method). Qwen3-235B-A22B-FP8 at TP8: experts of
    /// width 1,536 split 8 ways leave 192 per rank, so it cannot run (issue 13).
    fn check_weight_blocks(&self, model: &ModelSpec, engine: &str) -> Result<()> {
        self.check_shards(model, engine, true)
    }

    /// An engine that takes partial blocks (its scales laid out `ceil(width / block)` and
    /// split with the weight) still splits each weight evenly over its ranks.
    fn check_even_split(&self, model: &ModelSpec) -> Result<()> {
        self.check_shards(model, "", false)
    }

    /// Each split weight's width divides over its ranks, and with `whole_blocks` each
    /// rank's shard is a whole number of blocks of a block-scaled format.
    fn check_shards(&self, model: &ModelSpec, engine: &str, whole_blocks: bool) -> Result<()> {
        let q = &model.quantization;
        let c = &model.config;
        let mut shards: Vec<(&str, WeightFormat, u64, u32)> = Vec::new();
        if model.dense_layers() > 0 {
            if let Some(i) = c.intermediate_size {
                shards.push(("dense MLP width", q.dense_mlp(), i as u64, self.tp));
            }
        }
        if let Some(m) = model.moe() {
            shards.push((
                "expert width",
                q.routed_experts(),
                m.expert_intermediate as u64,
                self.moe_tp(),
            ));
            if m.shared > 0 {
                shards.push((
                    "shared-expert width",
                    q.shared_experts(),
                    m.expert_intermediate as u64 * m.shared as u64,
                    self.tp,
                ));
            }
        }
        if let Attention::Gqa { head_dim, .. } = model.attention() {
            shards.push((
                "attention output width (heads x head_dim)",
                q.attention(),
                c.num_attention_heads as u64 * head_dim as u64,
                self.tp,
            ));
        }
        for (what, w, width, ranks) in shards {
            if ranks <= 1 {
                continue;
            }
            // Every format: a split weight's shards are equal (vLLM's linear layers divide
            // the width by the ranks and refuse a remainder).
            let ranks64 = ranks as u64;
            let per_rank = width / ranks64;
            if !width.is_multiple_of(ranks64) {
                return Err(Error::Scenario(format!(
                    "layout {self} cannot run {}: its {what} {width} does not split evenly over \
                     {ranks} ranks",
                    model.name
                )));
            }
            // Unsplit, a partial last block is fine (vLLM checks split shards only).
            let Some(b) = w.block_edge() else {
                continue;
            };
            if whole_blocks && !per_rank.is_multiple_of(b as u64) {
                return Err(Error::Scenario(format!(
                    "layout {self} cannot run {}: its {what} {width} split over {ranks} ranks \
                     leaves {per_rank} per rank, not a multiple of the {b}-wide {w} weight \
                     blocks (engine {engine} refuses it)",
                    model.name,
                )));
            }
        }
        Ok(())
    }
}

impl fmt::Display for Parallel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tp{}", self.tp)?;
        if self.ep > 1 {
            write!(f, "ep{}", self.ep)?;
        }
        if self.dp > 1 {
            write!(f, "dp{}", self.dp)?;
        }
        if self.pp > 1 {
            write!(f, "pp{}", self.pp)?;
        }
        if self.redundant_experts > 0 {
            write!(f, "re{}", self.redundant_experts)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Parallel {
    type Err = String;
    /// `tp8`, `tp4ep2`, `pp2tp4`, `tp8ep8dp8`: degrees in any order, missing ones are 1;
    /// `re2`: two redundant expert slots per expert-parallel group (none if absent).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let mut p = Parallel {
            tp: 1,
            ep: 1,
            pp: 1,
            dp: 1,
            redundant_experts: 0,
        };
        let mut rest = s.trim();
        if rest.is_empty() {
            return Err("empty layout; expected e.g. tp8, tp4ep2, pp2tp4".into());
        }
        const EXPECTED: &str =
            "expected degrees such as tp8, tp4ep2, pp2tp4 (tp, ep, pp, dp; re: redundant experts)";
        let mut seen = Vec::new();
        while !rest.is_empty() {
            let key = rest
                .get(..2)
                .filter(|k| ["tp", "ep", "pp", "dp", "re"].contains(k))
                .ok_or_else(|| {
                    format!("bad layout \"{s}\": \"{rest}\" does not start with tp, ep, pp, dp or re; {EXPECTED}")
                })?;
            rest = &rest[2..];
            if seen.contains(&key) {
                return Err(format!("bad layout \"{s}\": {key} given twice; {EXPECTED}"));
            }
            seen.push(key);
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            rest = &rest[digits.len()..];
            let v: u32 = digits.parse().ok().filter(|v| *v > 0).ok_or_else(|| {
                format!("bad layout \"{s}\": {key} needs a whole number of at least 1 (e.g. {key}8); {EXPECTED}")
            })?;
            match key {
                "tp" => p.tp = v,
                "ep" => p.ep = v,
                "pp" => p.pp = v,
                "re" => p.redundant_experts = v,
                _ => p.dp = v,
            }
        }
        Ok(p)
    }
}

/// Whether a pass decodes (new tokens read a cached context) or prefills a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Decode,
    Prefill,
}

/// Sequences the busiest of `dp` replicas holds when `sequences` are dealt whole, one at
/// a time in turn: `ceil(n / dp)` for a whole count `n`; for a mean between two whole
/// counts (a serving loop's running sequences), the same blend of its two neighbours, so
/// the step grows continuously with the batch and never runs below an even share.
pub fn busiest_replica_sequences(sequences: f64, dp: u32) -> f64 {
    if sequences <= 0.0 {
        return 0.0;
    }
    let dp = dp.max(1) as f64;
    let whole = |n: f64| (n / dp).ceil();
    let lo = sequences.floor();
    let f = sequences - lo;
    (whole(lo) * (1.0 - f) + whole(lo + 1.0) * f).max(sequences / dp)
}

/// The shape of one forward pass over the whole system.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pass {
    pub phase: Phase,
    /// Sequences in the pass (all data-parallel replicas together).
    pub sequences: f64,
    /// New tokens per sequence: 1 for plain decode, k+1 for a speculative verify, the prompt
    /// (or chunk) length for prefill.
    pub tokens_per_sequence: f64,
    /// Tokens already cached per sequence that the new tokens attend to (mean).
    pub context: f64,
    /// Prompt tokens of other requests prefilled in the same step (chunked prefill mixes
    /// them into decode steps): they add to every GEMM's rows and to the experts' tokens,
    /// and attend causally within their own prompts.
    pub mixed_prefill_tokens: f64,
    /// Prompt length of those mixed-in prefills (for their attention span).
    pub mixed_prefill_len: f64,
    /// Share of the pass's own sequences that its busiest attention-data-parallel replica
    /// runs (None: an even share, `1 / dp`). A sequence lives on one replica: its prompt is
    /// never split over replicas, and the replicas step together (they meet at every MoE
    /// layer's dispatch and combine, an idle one running an empty batch), so a pass of fewer
    /// prompts than replicas takes as long as the replica that holds one.
    pub busiest_replica_share: Option<f64>,
}

impl Pass {
    /// Plain decode: `batch` sequences, one new token each, `context` cached tokens.
    pub fn decode(batch: f64, context: f64) -> Pass {
        Pass {
            phase: Phase::Decode,
            sequences: batch,
            tokens_per_sequence: 1.0,
            context,
            mixed_prefill_tokens: 0.0,
            mixed_prefill_len: 0.0,
            busiest_replica_share: None,
        }
    }

    /// The same pass with `tokens` prompt tokens of prompts of length `len` mixed in.
    pub fn with_prefill(self, tokens: f64, len: f64) -> Pass {
        Pass {
            mixed_prefill_tokens: tokens.max(0.0),
            mixed_prefill_len: len.max(1.0),
            ..self
        }
    }

    /// Prefill of `sequences` prompts of `prompt` tokens with `context` tokens already cached
    /// (0 for a fresh prompt; the previous chunks for chunked prefill).
    pub fn prefill(sequences: f64, prompt: f64, context: f64) -> Pass {
        Pass {
            phase: Phase::Prefill,
            sequences,
            tokens_per_sequence: prompt,
            context,
            mixed_prefill_tokens: 0.0,
            mixed_prefill_len: 0.0,
            busiest_replica_share: None,
        }
    }

    /// The same pass with its sequences dealt whole to `dp` replicas, one at a time in turn
    /// (round robin): the busiest holds `ceil(sequences / dp)` of them.
    pub fn dealt_whole(self, dp: u32) -> Pass {
        let dp = dp.max(1) as f64;
        let share = if self.sequences > 0.0 {
            ((self.sequences / dp).ceil() / self.sequences).min(1.0)
        } else {
            1.0 / dp
        };
        Pass {
            busiest_replica_share: Some(share),
            ..self
        }
    }

    /// Share of the own sequences on the busiest of `dp` replicas (at least an even share,
    /// at most all of them). A decode pass's sequences live whole on their replicas (dealt
    /// in turn, as the engines balance them: [`busiest_replica_sequences`]), so one
    /// sequence over 8 replicas is one replica's whole step, not an eighth of one.
    pub fn replica_share(&self, dp: u32) -> f64 {
        let even = 1.0 / dp.max(1) as f64;
        match self.busiest_replica_share {
            Some(s) => s.clamp(even, 1.0),
            None if self.phase == Phase::Decode && dp > 1 && self.sequences > 0.0 => {
                (busiest_replica_sequences(self.sequences, dp) / self.sequences).clamp(even, 1.0)
            }
            None => even,
        }
    }

    /// Sequences, own tokens and all GEMM rows of the busiest of `dp` replicas (mixed-in
    /// prompt tokens spread evenly).
    pub fn replica_sequences(&self, dp: u32) -> f64 {
        self.sequences * self.replica_share(dp)
    }
    pub fn replica_own_tokens(&self, dp: u32) -> f64 {
        self.tokens() * self.replica_share(dp)
    }
    pub fn replica_tokens(&self, dp: u32) -> f64 {
        self.replica_own_tokens(dp) + self.mixed_prefill_tokens / dp.max(1) as f64
    }

    /// New tokens of the pass's own sequences.
    pub fn tokens(&self) -> f64 {
        self.sequences * self.tokens_per_sequence
    }

    /// Every token the GEMMs process: the pass's own and the mixed-in prompt tokens.
    pub fn all_tokens(&self) -> f64 {
        self.tokens() + self.mixed_prefill_tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_sequences_live_whole_on_their_replicas() {
        // One sequence over eight replicas is one replica's whole batch.
        assert_eq!(Pass::decode(1.0, 1024.0).replica_sequences(8), 1.0);
        assert!((Pass::decode(9.0, 1024.0).replica_sequences(8) - 2.0).abs() < 1e-12);
        assert!((Pass::decode(16.0, 1024.0).replica_sequences(8) - 2.0).abs() < 1e-12);
        assert_eq!(Pass::decode(3.0, 1024.0).replica_sequences(1), 3.0);
        // A mean between whole counts blends its neighbours: never falling as the batch
        // grows, never jumping, never below the even share.
        let mut last = 0.0;
        for i in 1..=400 {
            let b = i as f64 * 0.05;
            let n = busiest_replica_sequences(b, 8);
            assert!(n >= last - 1e-12 && n >= b / 8.0 - 1e-12, "b={b}: {n}");
            assert!(n - last <= 0.05 + 1e-12, "b={b}: jumps {last} -> {n}");
            last = n;
        }
        assert_eq!(busiest_replica_sequences(0.0, 8), 0.0);
    }

    #[test]
    fn prompts_dealt_whole_put_a_whole_prompt_on_the_busiest_replica() {
        // One prompt over eight replicas: one replica holds all of it.
        let one = Pass::prefill(1.0, 8192.0, 0.0).dealt_whole(8);
        assert_eq!(one.replica_share(8), 1.0);
        assert_eq!(one.replica_own_tokens(8), 8192.0);
        // Nine prompts: the busiest holds two of them.
        let nine = Pass::prefill(9.0, 1024.0, 0.0).dealt_whole(8);
        assert!((nine.replica_sequences(8) - 2.0).abs() < 1e-12);
        // A multiple of the replicas: the even share.
        let sixteen = Pass::prefill(16.0, 1024.0, 0.0).dealt_whole(8);
        assert!((sixteen.replica_share(8) - 1.0 / 8.0).abs() < 1e-12);
        // Without attention DP nothing changes, and an undealt pass keeps the even share.
        assert_eq!(
            Pass::prefill(1.5, 512.0, 0.0)
                .dealt_whole(1)
                .replica_share(1),
            1.0
        );
        let even = Pass::prefill(1.0, 8192.0, 0.0);
        assert_eq!(even.replica_own_tokens(8), 1024.0);
        // Mixed-in prompt tokens spread evenly either way.
        let mixed = Pass::decode(8.0, 100.0)
            .with_prefill(800.0, 800.0)
            .dealt_whole(8);
        assert!((mixed.replica_tokens(8) - (1.0 + 100.0)).abs() < 1e-12);
    }
}
