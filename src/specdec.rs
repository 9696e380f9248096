//! Speculative decoding: the gain per draft method, draft length and concurrency, before
//! anyone builds it.
//!
//! One speculative step = k draft passes (or none, for n-gram lookup) + one verify pass of
//! the target over `C × (k+1)` tokens, with every term of the cost model: the verify batch
//! touches more MoE experts, moves more all-reduce bytes, reads the KV cache for k+1
//! positions and turns compute-bound as C grows; the engine's per-step cost is paid once.
//! With per-position acceptance p₁…p_k (a chain: draft i counts only if drafts 1..i−1 did),
//! the expected tokens per step are `1 + Σᵢ Πⱼ≤ᵢ pⱼ`; TPOT = step / that. Drafts run inside
//! the engine's step: their passes pay kernel gaps and all-reduces but no step overhead.
//! Prefill interleaving is left out: the comparison is decode against decode. C concurrent
//! requests run as `sweep` runs them, the rest waiting: at most `max_num_seqs` (and while
//! speculating no more than the engine's cap then, SGLang's 48 with EAGLE), as many as the
//! KV cache holds at the context plus the draft when speculating, and where the engine's
//! token budget counts decode tokens (vLLM, TensorRT-LLM) as many as verify within it, `k + 1`
//! tokens each. The speedup is
//! the tokens per second over all C requests, with speculation against without.

use crate::cost::{CostParams, Evaluator, Parallel, Pass};
use crate::error::{Error, Result};
use crate::predict::Scenario;
use crate::spec::{ModelSpec, WeightFormat};
use serde::Serialize;

/// Where draft tokens come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Draft {
    /// The target's own multi-token-prediction layer (DeepSeek-V3, GLM-5): one full decoder
    /// layer of the target, run once per draft token.
    Mtp,
    /// An EAGLE-1/2 head: the model's `[eagle_head]` decoder layers, projecting through the
    /// target's own lm_head (its whole vocabulary).
    Eagle,
    /// An EAGLE-3 head: the model's `[eagle_head]` as published, its decoder layers with
    /// their own attention shape and its own lm_head over the reduced draft vocabulary
    /// (`draft_vocab_size`).
    Eagle3,
    /// N-gram / prompt lookup: no GPU work, a CPU cost per step.
    Ngram { cpu_seconds: f64 },
    /// A separate draft model on the same GPUs with its own tensor parallelism.
    Model { spec: Box<ModelSpec>, tp: u32 },
}

impl Draft {
    pub fn name(&self) -> String {
        match self {
            Draft::Mtp => "mtp".into(),
            Draft::Eagle => "eagle".into(),
            Draft::Eagle3 => "eagle3".into(),
            Draft::Ngram { .. } => "ngram".into(),
            Draft::Model { spec, tp } => format!("model:{} (tp{tp})", spec.name),
        }
    }
}

/// Longest draft length (and so accepted length) rooftop evaluates.
pub const MAX_DRAFT_LENGTH: u32 = 64;

/// Which acceptance statistic `--acceptance` gives, as an engine prints it
/// (`--acceptance-stat`). Every one is converted to per-position conditional rates
/// p₁…p_k (rooftop's own form, [`Acceptance`]); with L the drafts accepted in one step, of k
/// drafted:
///
/// | statistic | what it is | conversion |
/// |---|---|---|
/// | `conditional` | pᵢ = P(L ≥ i \| L ≥ i−1), per position | as given |
/// | `unconditional` (vLLM's per-position acceptance rate: accepted at position i / drafts) | uᵢ = P(L ≥ i) | pᵢ = uᵢ / uᵢ₋₁, u₀ = 1; a rise in uᵢ is refused |
/// | `vllm-mean-length` (vLLM's mean acceptance length, bonus counted) | τ = 1 + E[L] | constant p with (1 − p^{k+1}) / (1 − p) = τ |
/// | `mean-accepted` (the same length without the bonus token) | E[L] | τ = 1 + E[L], then as above |
/// | `sglang-accept-length` (SGLang's average accept length, bonus counted) | τ = 1 + E[L] | as `vllm-mean-length` |
/// | `trtllm-acceptance-rate` (accepted draft tokens / drafted tokens; vLLM's draft acceptance rate) | r = E[L] / k | τ = 1 + r·k, then as above |
///
/// A single figure (a length or a rate) fixes the expected tokens per step only at the draft
/// length it was measured at (`--acceptance-k`): it is turned into the one constant rate that
/// gives exactly that τ at that k, and other draft lengths follow that constant rate (an
/// assumption; acceptance usually falls with position, so longer drafts are then
/// optimistic). `tests/specdec.rs` checks each conversion against a seeded Monte-Carlo run
/// of the acceptance process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum AcceptanceStat {
    /// Per-position conditional rates (0..1; the last repeats).
    #[default]
    Conditional,
    /// Per-position unconditional rates P(at least i drafts accepted), as vLLM prints them.
    Unconditional,
    /// vLLM's mean acceptance length, counting the bonus token (1..k+1).
    VllmMeanLength,
    /// Mean accepted drafts per step, without the bonus token (0..k).
    MeanAccepted,
    /// SGLang's average accept length, counting the bonus token (1..k+1).
    SglangAcceptLength,
    /// TensorRT-LLM's acceptance rate: accepted draft tokens over drafted tokens (0..1).
    TrtllmAcceptanceRate,
}

impl AcceptanceStat {
    /// The name on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            AcceptanceStat::Conditional => "conditional",
            AcceptanceStat::Unconditional => "unconditional",
            AcceptanceStat::VllmMeanLength => "vllm-mean-length",
            AcceptanceStat::MeanAccepted => "mean-accepted",
            AcceptanceStat::SglangAcceptLength => "sglang-accept-length",
            AcceptanceStat::TrtllmAcceptanceRate => "trtllm-acceptance-rate",
        }
    }

    /// A single figure measured at one draft length (not a list of rates).
    pub fn is_scalar(self) -> bool {
        !matches!(
            self,
            AcceptanceStat::Conditional | AcceptanceStat::Unconditional
        )
    }
}

/// The constant conditional rate p whose chain of `k` drafts gives `tau` expected tokens per
/// step: `(1 − p^{k+1}) / (1 − p) = tau`, for 1 ≤ tau ≤ k + 1 (bisection; the left side
/// rises with p).
fn constant_rate_for(tau: f64, k: usize) -> f64 {
    let e = |p: f64| Acceptance(vec![p]).expected_tokens(k);
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if e(mid) < tau {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Per-position acceptance probabilities; position i beyond the list uses the last value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Acceptance(pub Vec<f64>);

impl Acceptance {
    pub fn at(&self, i: usize) -> f64 {
        self.0.get(i).or(self.0.last()).copied().unwrap_or(0.0)
    }

    /// Expected tokens per step with `k` drafts: `1 + Σᵢ Πⱼ≤ᵢ pⱼ`.
    pub fn expected_tokens(&self, k: usize) -> f64 {
        let mut e = 1.0;
        let mut run = 1.0;
        for i in 0..k {
            run *= self.at(i);
            e += run;
        }
        e
    }

    /// Per-position rates from measured accepted lengths (drafts accepted per step):
    /// `pᵢ = P(L ≥ i) / P(L ≥ i−1)`.
    pub fn from_lengths(lengths: &[u32]) -> Result<Acceptance> {
        if lengths.is_empty() {
            return Err(Error::Scenario("no acceptance lengths".into()));
        }
        let max = *lengths.iter().max().unwrap_or(&0);
        // One rate per position up to the longest run: a typo such as 4294967295 would ask
        // for gigabytes of rates.
        if max > MAX_DRAFT_LENGTH {
            return Err(Error::Scenario(format!(
                "accepted length {max}: more drafts per step than any draft length (1..{MAX_DRAFT_LENGTH})"
            )));
        }
        let max = max as usize;
        let n = lengths.len() as f64;
        let survive = |i: usize| lengths.iter().filter(|l| **l as usize >= i).count() as f64 / n;
        let mut p = Vec::with_capacity(max + 1);
        for i in 1..=max {
            let prev = survive(i - 1);
            p.push(if prev > 0.0 { survive(i) / prev } else { 0.0 });
        }
        // Beyond the longest observed run nothing was accepted.
        p.push(0.0);
        Ok(Acceptance(p))
    }

    /// Per-position conditional rates from a statistic as an engine prints it (see
    /// [`AcceptanceStat`]); `k` is the draft length a single figure was measured at.
    pub fn from_stat(stat: AcceptanceStat, values: &[f64], k: Option<u32>) -> Result<Acceptance> {
        let bad = |why: String| {
            Err(Error::Scenario(format!(
                "--acceptance-stat {}: {why}",
                stat.name()
            )))
        };
        if values.is_empty() || values.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return bad("acceptance figures must be finite numbers at or above 0".into());
        }
        if !stat.is_scalar() {
            if values.iter().any(|v| *v > 1.0) {
                return bad(format!(
                    "per-position rates must be in 0..1, got {values:?}"
                ));
            }
            if values.len() > MAX_DRAFT_LENGTH as usize {
                return bad(format!("more than {MAX_DRAFT_LENGTH} positions"));
            }
        }
        match stat {
            AcceptanceStat::Conditional => Ok(Acceptance(values.to_vec())),
            AcceptanceStat::Unconditional => {
                let mut p = Vec::with_capacity(values.len());
                let mut prev = 1.0;
                for (i, &u) in values.iter().enumerate() {
                    // A rate may not rise with position: a draft counts only if every earlier
                    // one did (a rounding slack of 1e-9 aside).
                    if u > prev + 1e-9 {
                        return bad(format!(
                            "unconditional rates cannot rise with position: position {} has {u} after {prev}",
                            i + 1
                        ));
                    }
                    p.push(if prev > 0.0 { (u / prev).min(1.0) } else { 0.0 });
                    prev = u;
                }
                Ok(Acceptance(p))
            }
            _ => {
                if values.len() != 1 {
                    return bad(format!("one figure, not {}", values.len()));
                }
                let k = match k {
                    Some(k) if (1..=MAX_DRAFT_LENGTH).contains(&k) => k as usize,
                    Some(k) => return bad(format!("--acceptance-k {k} is outside 1..{MAX_DRAFT_LENGTH}")),
                    None => return bad("a single figure holds at the draft length it was measured at: give --acceptance-k (or one --k)".into()),
                };
                let v = values[0];
                let tau = match stat {
                    AcceptanceStat::VllmMeanLength | AcceptanceStat::SglangAcceptLength => v,
                    AcceptanceStat::MeanAccepted => 1.0 + v,
                    AcceptanceStat::TrtllmAcceptanceRate => {
                        if v > 1.0 {
                            return bad(format!("a rate is in 0..1, got {v}"));
                        }
                        1.0 + v * k as f64
                    }
                    AcceptanceStat::Conditional | AcceptanceStat::Unconditional => unreachable!(),
                };
                if !(1.0..=k as f64 + 1.0 + 1e-9).contains(&tau) {
                    return bad(format!(
                        "{v} means {tau:.3} tokens per step, outside 1..{} for {k} drafts (the bonus token plus at most k accepted)",
                        k + 1
                    ));
                }
                Ok(Acceptance(vec![constant_rate_for(
                    tau.min(k as f64 + 1.0),
                    k,
                )]))
            }
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.0.is_empty()
            || self
                .0
                .iter()
                .any(|p| !(0.0..=1.0).contains(p) || !p.is_finite())
        {
            return Err(Error::Scenario(
                "acceptance rates must be numbers in 0..1, e.g. 0.8 or 0.85,0.6,0.4".into(),
            ));
        }
        Ok(())
    }
}

/// One (k, C) point.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SpecPoint {
    pub k: u32,
    pub concurrency: u32,
    /// Sequences decoding at once while speculating: C, or fewer where the engine's cap
    /// (its cap while speculating, if lower) or the KV cache hold it.
    pub running: u32,
    /// The same without speculation (no draft positions cached, the engine's plain cap).
    pub plain_running: u32,
    pub tpot_ms: f64,
    /// 95 % interval of `tpot_ms` from the calibration's covariance (calibrated runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ci95_ms: Option<[f64; 2]>,
    pub throughput_tok_s: f64,
    /// Output tokens per second over the C requests with speculation, over the same without:
    /// plain-decode TPOT over speculative TPOT where both run as many sequences; where
    /// speculation runs fewer, over the better of plain decoding at either count.
    pub speedup: f64,
    pub expected_tokens_per_step: f64,
    pub draft_ms: f64,
    pub verify_ms: f64,
    pub step_ms: f64,
}

/// Best draft length at one concurrency (k = 0: do not speculate).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BestK {
    pub concurrency: u32,
    pub k: u32,
    pub speedup: f64,
}

/// Where speculation with one draft length stops paying over the swept concurrencies.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Breakeven {
    pub k: u32,
    /// The first swept concurrency where the speedup is below 1 (absent: it pays at every
    /// swept concurrency).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stops_at: Option<u32>,
    /// Where the speedup crosses 1, interpolated in log concurrency between the last swept
    /// point that pays and the first that does not (absent when it never pays, or never
    /// stops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crossing_concurrency: Option<f64>,
    /// The first swept concurrency above `stops_at` where it pays again (absent: it never
    /// does). A MoE verify pass loses at middle concurrencies, where its k + 1 tokens per
    /// sequence reach experts a plain step would not read, and pays again once the plain
    /// batch reads them all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pays_again_at: Option<u32>,
    /// Why, in words: what the speculative step costs against the plain one where it stops.
    pub why: String,
}

/// Where each draft length stops paying: speculation yields `e` tokens a step for a step
/// of draft plus verify; it loses once that step costs more than `e` plain steps, which
/// happens as the batch grows because the verify pass multiplies the tokens per sequence
/// (more experts read, GEMMs nearer their compute bound) while the plain step's weight
/// reads are already shared by the batch.
pub fn breakeven(points: &[SpecPoint], baseline_tpot_ms: &[(u32, f64)]) -> Vec<Breakeven> {
    let mut ks: Vec<u32> = points.iter().map(|p| p.k).collect();
    ks.sort_unstable();
    ks.dedup();
    ks.into_iter()
        .map(|k| {
            let mut row: Vec<&SpecPoint> = points.iter().filter(|p| p.k == k).collect();
            row.sort_by_key(|p| p.concurrency);
            let first_loss = row.iter().position(|p| p.speedup < 1.0);
            let Some(i) = first_loss else {
                let why = match row.last() {
                    Some(p) => format!(
                        "pays at every swept concurrency (at C = {}: {:.2}x)",
                        p.concurrency, p.speedup
                    ),
                    None => "no point could run".to_string(),
                };
                return Breakeven {
                    k,
                    stops_at: None,
                    crossing_concurrency: None,
                    pays_again_at: None,
                    why,
                };
            };
            let p = row[i];
            let base = baseline_tpot_ms
                .iter()
                .find(|(c, _)| *c == p.concurrency)
                .map_or(f64::NAN, |(_, b)| *b);
            let mut why = format!(
                "at C = {} the speculative step costs {:.2}x the plain step (verify {:.2}x, \
                 draft {:.2}x) and yields {:.2} tokens",
                p.concurrency,
                p.step_ms / base,
                p.verify_ms / base,
                p.draft_ms / base,
                p.expected_tokens_per_step
            );
            if p.running < p.plain_running {
                why.push_str(&format!(
                    ", for {} running sequences against {} without speculation (the engine's \
                     cap while speculating, the KV cache its drafts take, or the token budget \
                     its verify takes)",
                    p.running, p.plain_running
                ));
            }
            let crossing = (i > 0).then(|| {
                let a = row[i - 1];
                let (la, lb) = ((a.concurrency as f64).ln(), (p.concurrency as f64).ln());
                // Linear in log C between the two speedups, which straddle 1.
                let t = (a.speedup - 1.0) / (a.speedup - p.speedup);
                (la + t * (lb - la)).exp()
            });
            let pays_again_at = row[i + 1..]
                .iter()
                .find(|q| q.speedup >= 1.0)
                .map(|q| q.concurrency);
            Breakeven {
                k,
                stops_at: Some(p.concurrency),
                crossing_concurrency: crossing,
                pays_again_at,
                why,
            }
        })
        .collect()
}

/// The `specdec` record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SpecDec {
    pub model: String,
    pub system: String,
    pub parallel: String,
    pub draft: String,
    pub acceptance: Acceptance,
    pub context: u32,
    pub provenance: &'static str,
    /// Plain decode TPOT per concurrency, ms.
    pub baseline_tpot_ms: Vec<(u32, f64)>,
    pub points: Vec<SpecPoint>,
    pub best_k: Vec<BestK>,
    /// Per draft length, where speculation stops paying and why.
    pub breakeven: Vec<Breakeven>,
    /// Concurrencies whose sequences do not fit in memory at this context plus the longest
    /// draft, with the reason: they get no numbers.
    pub does_not_fit: Vec<(u32, String)>,
}

/// A one-layer model standing for the draft head: the target's shape with `layers` decoder
/// layers, as MoE or dense, in `format`; with `attention` (query heads, key/value heads,
/// head width) a plain attention of that shape in place of the target's (an EAGLE-3 head's
/// Llama layer on an MLA target).
fn head_model(
    target: &ModelSpec,
    layers: u32,
    moe: bool,
    intermediate: Option<u32>,
    format: Option<WeightFormat>,
    vocab: Option<u32>,
    attention: Option<(u32, u32, u32)>,
) -> ModelSpec {
    let mut m = target.clone();
    m.name = format!("{}-draft-head", target.name);
    m.config.num_hidden_layers = layers.max(1);
    m.config.layer_types = None;
    if moe {
        m.config.first_k_dense_replace = Some(0);
    } else {
        m.config.n_routed_experts = None;
        m.config.num_experts_per_tok = None;
        m.config.n_shared_experts = None;
        m.config.first_k_dense_replace = None;
        if let Some(i) = intermediate {
            m.config.intermediate_size = Some(i);
        }
    }
    if let Some((q, kv, hd)) = attention {
        let c = &mut m.config;
        c.num_attention_heads = q;
        c.num_key_value_heads = Some(kv);
        c.head_dim = Some(hd);
        // Neither MLA, compressed nor sparse attention, and no per-layer variants.
        c.q_lora_rank = None;
        c.kv_lora_rank = None;
        c.qk_nope_head_dim = None;
        c.qk_rope_head_dim = None;
        c.v_head_dim = None;
        c.compress_ratios = None;
        c.o_lora_rank = None;
        c.o_groups = None;
        c.index_topk = None;
        c.index_n_heads = None;
        c.index_head_dim = None;
        c.indexer_types = None;
        c.sliding_window = None;
        c.layer_num_key_value_heads = None;
        c.global_head_dim = None;
        c.num_global_key_value_heads = None;
        c.attention_k_eq_v = false;
        c.attn_output_gate = false;
    }
    if let Some(f) = format {
        m.quantization.default = f;
        m.quantization.attention = None;
        m.quantization.dense_mlp = None;
    }
    if let Some(v) = vocab.filter(|v| *v > 0) {
        m.config.vocab_size = v;
    }
    m
}

/// What runs the draft passes: the draft's own model and its layout on the target's GPUs.
/// `None` for n-gram lookup, which runs no model.
///
/// A head (MTP, EAGLE) runs on the last pipeline stage's GPUs only, so its one or two
/// layers are laid out without the target's pipeline split (which they could not fill); an
/// EAGLE head is dense, with no experts to spread over expert-parallel groups. A separate
/// draft model runs with its own tensor parallelism.
fn draft_model(s: &Scenario, draft: &Draft) -> Result<Option<(ModelSpec, Parallel)>> {
    let stage = Parallel {
        pp: 1,
        ..s.parallel
    };
    // What else this model can draft with, for a refusal to name (only what it has).
    let others = |missing: &str| {
        let mut v: Vec<&str> = Vec::new();
        if s.model.eagle_head.is_some() {
            v.push("eagle3");
        }
        if s.model.config.num_nextn_predict_layers.unwrap_or(0) > 0 {
            v.push("mtp");
        }
        v.extend(["ngram", "model:NAME"]);
        format!(
            "model {} has no {missing}; use --draft {}",
            s.model.name,
            v.join(", ")
        )
    };
    let eagle = |reduced_vocab: bool| -> Result<(ModelSpec, Parallel)> {
        let e = s.model.eagle_head.as_ref().ok_or_else(|| {
            Error::Scenario(format!(
                "{}, or add an [eagle_head] description",
                others("[eagle_head] description")
            ))
        })?;
        let head = head_model(
            s.model,
            e.num_layers,
            false,
            Some(e.intermediate_size),
            Some(e.format),
            reduced_vocab.then_some(e.draft_vocab_size),
            e.attention(s.model.config.hidden_size),
        );
        Ok((head, Parallel { ep: 1, ..stage }))
    };
    Ok(Some(match draft {
        Draft::Ngram { .. } => return Ok(None),
        Draft::Mtp => {
            let n = s.model.config.num_nextn_predict_layers.unwrap_or(0);
            if n == 0 {
                return Err(Error::Scenario(others(
                    "MTP layer (num_nextn_predict_layers)",
                )));
            }
            let head = head_model(s.model, 1, s.model.moe().is_some(), None, None, None, None);
            (head, stage)
        }
        Draft::Eagle => eagle(false)?,
        Draft::Eagle3 => eagle(true)?,
        Draft::Model { spec, tp } => ((**spec).clone(), Parallel::tp(*tp)),
    }))
}

/// Time of the k draft passes at `c` sequences, seconds.
/// The draft passes of one step on `ev`: the first runs over the tokens the last verify
/// accepted (`first` per sequence: the draft catches up on them, as vLLM's and SGLang's
/// EAGLE workers do), each later one over `topk` tokens per sequence (a tree's branches; 1 for
/// a chain), `k` passes in all.
fn draft_passes(ev: &Evaluator, shape: DraftShape, first: f64, c: f64, ctx: f64) -> f64 {
    let at = |t: f64| {
        ev.step_time(&Pass {
            tokens_per_sequence: t,
            ..Pass::decode(c, ctx)
        })
    };
    at(first.max(1.0)) + (shape.k.saturating_sub(1)) as f64 * at(shape.topk.max(1) as f64)
}

fn draft_time(
    s: &Scenario,
    draft: &Draft,
    shape: DraftShape,
    first: f64,
    c: f64,
    ctx: f64,
) -> Result<f64> {
    let k = shape.k;
    if k == 0 {
        return Ok(0.0);
    }
    // Drafts run inside the engine's step: no second per-step overhead.
    let mut p: CostParams = s.params;
    p.step_overhead = 0.0;
    if let Draft::Ngram { cpu_seconds } = draft {
        return Ok(*cpu_seconds);
    }
    let Some((model, par)) = draft_model(s, draft)? else {
        return Ok(0.0);
    };
    // A head whose attention heads the layout cannot split is a draft no engine can load.
    let ev = Evaluator::new(&model, s.system, par, p).map_err(|e| {
        Error::Scenario(format!(
            "the {} draft cannot run on this layout: {e}",
            draft.name()
        ))
    })?;
    let t = draft_passes(&ev, shape, first, c, ctx);
    Ok(t)
}

/// What the draft holds on one GPU beside the target, from the same memory as the
/// target's KV cache.
#[derive(Debug, Clone, Copy, Default)]
struct DraftResidency {
    /// Weight bytes the draft adds: a draft model's whole weights; a head's layers (an MTP
    /// layer, an EAGLE head's layer), which share the target's embedding and, but for an
    /// EAGLE-3 head's own lm_head over its draft vocabulary, its lm_head (vLLM's EAGLE
    /// proposer and SGLang's draft worker point the head at the target's tensors).
    weights: f64,
    /// Bytes one cached token of the draft's own layers holds: an EAGLE head's attention
    /// layer, the MTP layer, a draft model's whole cache. The engines allocate them from
    /// the same memory as the target's cache, for every token of the sequence: vLLM's
    /// drafter layers are KV-cache groups of the one pool (v1/spec_decode/eagle.py,
    /// initialize_attn_backend), SGLang's draft worker holds a token pool as large as the
    /// target's (speculative/eagle_worker.py).
    cache_per_token: f64,
}

impl DraftResidency {
    /// Plain decoding, or n-gram lookup: nothing beside the target.
    const NONE: DraftResidency = DraftResidency {
        weights: 0.0,
        cache_per_token: 0.0,
    };
}

fn draft_residency(s: &Scenario, draft: &Draft) -> Result<DraftResidency> {
    use crate::cost::memory::Residency;
    let Some((m, par)) = draft_model(s, draft)? else {
        return Ok(DraftResidency::NONE);
    };
    let r = Residency::new(&m, &par);
    let weights = match draft {
        Draft::Model { .. } => r.weight_bytes(),
        _ => {
            // One layer's bytes: the head with one layer more, less the head.
            let mut more = m.clone();
            more.config.num_hidden_layers += 1;
            let layer = Residency::new(&more, &par).weight_bytes() - r.weight_bytes();
            let layers = layer.max(0.0) * m.config.num_hidden_layers as f64;
            let own_lm_head = if matches!(draft, Draft::Eagle3) {
                m.config.vocab_size as f64
                    * m.config.hidden_size as f64
                    * m.quantization.lm_head().bits_per_weight()
                    / 8.0
                    / par.tp.max(1) as f64
            } else {
                0.0
            };
            layers + own_lm_head
        }
    };
    Ok(DraftResidency {
        weights,
        cache_per_token: r.kv_bytes_per_token(),
    })
}

/// Sequences one verify pass takes under the engine's token budget: where the budget counts
/// every token of a step (vLLM's `max_num_batched_tokens`, TensorRT-LLM's `max_num_tokens`:
/// the engines that mix prefill into decode steps), a sequence verifying `k` drafts spends
/// `k + 1` of it (a tree its whole draft-token budget), and the scheduler verifies no more
/// sequences a step than the budget holds; the rest wait for the next step. SGLang's
/// `chunked_prefill_size` bounds prefill chunks only, and its decode batch is not held to it.
fn verify_budget_cap(engine: &crate::spec::engine::EngineSpec, shape: DraftShape) -> u32 {
    if !engine.mixes_prefill_with_decode() {
        return u32::MAX;
    }
    let per_sequence = shape.verify_tokens.max(shape.k + 1).max(1);
    (engine.max_num_batched_tokens / per_sequence).max(1)
}

/// Sequences of `tokens` cached positions that fit in the target's KV budget less the
/// draft's weights, each also holding the draft's cache ([`crate::serve::fits`] refuses
/// what does not fit at all, with the target alone).
fn sequences_fitting(s: &Scenario, tokens: f64, d: DraftResidency) -> Result<f64> {
    let m = crate::serve::fits(s, 1.0, tokens)?;
    if d.cache_per_token <= 0.0 && d.weights <= 0.0 {
        return Ok(m.max_sequences_at_context);
    }
    let dp = s.parallel.dp.max(1) as f64;
    // What one sequence holds on the GPUs of its replica (the report of one sequence: it
    // lives whole on one), the draft's cache beside it.
    let per_seq = m.kv_needed_gb * 1e9 + d.cache_per_token * (tokens + 1.0);
    let budget = (m.kv_budget_gb * 1e9 - d.weights).max(0.0);
    let max_tokens = crate::predict::kv_tokens(budget, per_seq, tokens, dp);
    Ok(crate::predict::sequences(max_tokens, tokens))
}

/// [`crate::serve::fits`] for `batch` speculating sequences of `tokens` cached positions
/// beside the draft's weights and cache.
fn fits_speculating(s: &Scenario, batch: f64, tokens: f64, d: DraftResidency) -> Result<()> {
    crate::serve::fits(s, batch, tokens)?;
    let n = sequences_fitting(s, tokens, d)?;
    if n < batch {
        let m = s.memory(batch, tokens);
        return Err(Error::Scenario(format!(
            "does not fit: {batch} sequences of {tokens} tokens need {:.2} GB of KV cache per GPU with the draft's own cache ({:.0} B per token per GPU) beside the target's, {:.2} GB left after the draft's {:.2} GB of weights: at most {n} fit",
            m.kv_needed_gb
                + crate::ops::scenario::busiest_replica_sequences(batch, s.parallel.dp)
                    * d.cache_per_token
                    * (tokens + 1.0)
                    / 1e9,
            d.cache_per_token,
            (m.kv_budget_gb - d.weights / 1e9).max(0.0),
            d.weights / 1e9
        )));
    }
    Ok(())
}

/// One speculative step of `shape` for `batch` sequences at `ctx`, `e` tokens accepted per
/// step: the draft's time (with the engine's host work around the passes) and the verify
/// pass's, seconds. The verify pass checks every token
/// the draft proposed: `k + 1` per sequence for a chain, the whole tree (its draft-token
/// budget) for a tree, through the target's attention and MoE at the real batch.
fn speculative_step(
    s: &Scenario,
    ev: &Evaluator,
    draft: &Draft,
    shape: DraftShape,
    e: f64,
    batch: f64,
    ctx: f64,
) -> Result<(f64, f64)> {
    let verify = ev.step_time(&Pass {
        tokens_per_sequence: shape.verify_tokens.max(shape.k + 1) as f64,
        ..Pass::decode(batch, ctx)
    });
    Ok((
        draft_time(s, draft, shape, e, batch, ctx)? + scaffolding(s, draft, shape),
        verify,
    ))
}

/// The engine's host work around a speculative step's passes ([`SpeculationHost`]), in the
/// step's timeline and counted with the draft. N-gram lookup has no draft passes to glue:
/// its CPU cost is its own figure.
///
/// [`SpeculationHost`]: crate::spec::engine::SpeculationHost
fn scaffolding(s: &Scenario, draft: &Draft, shape: DraftShape) -> f64 {
    if matches!(draft, Draft::Ngram { .. }) || shape.k == 0 {
        return 0.0;
    }
    let engine = &s.system.engine;
    engine
        .speculation
        .step_cost(shape.k, shape.topk > 1, engine.kernel_launch.0)
}

/// How a step drafts: `k` tokens along each path (a chain, or SGLang's tree depth
/// `speculative_num_steps`), `topk` branches per draft step, and the tokens per sequence the
/// verify pass checks (`k + 1` for a chain; SGLang's `speculative_num_draft_tokens` for a tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DraftShape {
    pub k: u32,
    pub topk: u32,
    pub verify_tokens: u32,
}

impl DraftShape {
    /// A chain of `k` drafts.
    pub fn chain(k: u32) -> DraftShape {
        DraftShape {
            k,
            topk: 1,
            verify_tokens: k + 1,
        }
    }
}

/// Evaluate every (k, C) of chains of `ks` drafts.
pub fn specdec(
    s: &Scenario,
    draft: &Draft,
    acceptance: &Acceptance,
    ks: &[u32],
    concurrency: &[u32],
    context: u32,
) -> Result<SpecDec> {
    let shapes: Vec<DraftShape> = ks.iter().map(|&k| DraftShape::chain(k)).collect();
    specdec_shaped(s, draft, acceptance, &shapes, concurrency, context)
}

/// [`specdec`] over draft shapes (chains or trees).
pub fn specdec_shaped(
    s: &Scenario,
    draft: &Draft,
    acceptance: &Acceptance,
    shapes: &[DraftShape],
    concurrency: &[u32],
    context: u32,
) -> Result<SpecDec> {
    acceptance.validate()?;
    let ev = s.evaluator()?;
    let ctx = context as f64;
    let shortest = shapes.iter().map(|d| d.k).min().unwrap_or(0) as f64;
    let mut points = Vec::new();
    let mut best_k = Vec::new();
    let mut baseline_tpot_ms = Vec::new();
    let mut does_not_fit = Vec::new();
    // The first reason as the run gives it, for a run of which nothing fits.
    let mut refusal: Option<String> = None;
    // C means what it means to `sweep`: the engine runs as many of the C requests as its
    // cap on running sequences and the KV cache allow, the rest wait. Each side has its own:
    // a speculating sequence also caches the k drafted positions the target verifies, and
    // an engine may lower its cap while it speculates (SGLang's 48 with EAGLE).
    // Each draft length holds its own k drafted positions, so each has its own count of
    // sequences that fit: a k = 1 row is the same whatever other k are asked for.
    // Where not even one sequence fits, no concurrency can run: the reason, not a table.
    let engine = &s.system.engine;
    // A sequence past the model's window, or one the cache cannot hold even alone at the
    // shortest draft, is refused before anything is asked of the draft.
    crate::serve::fits(s, 1.0, ctx + shortest)?;
    // The draft's weights, and its layers' cache over the whole sequence, come from the
    // same memory as the target's cache: they lower the sequences that fit while speculating.
    let draft_held = draft_residency(s, draft)?;
    let kv_seqs = |tokens: f64, d: DraftResidency| -> Result<u32> {
        Ok(sequences_fitting(s, tokens, d)?.max(1.0) as u32)
    };
    // The engine's cap while speculating binds drafts that run a model (SGLang lowers it
    // for EAGLE, MTP and draft models, not for n-gram lookup).
    let drafts_a_model = !matches!(draft, Draft::Ngram { .. });
    // A calibration's in-flight cap (the client's connections or max_num_seqs, as a
    // measurement's flat curve implies) holds speculating and plain decoding alike, as it
    // holds `sweep` (there as a mean count; here the nearest whole one).
    let fitted_cap = s
        .params
        .inflight_cap
        .map_or(u32::MAX, |f| f.round().clamp(1.0, u32::MAX as f64) as u32);
    // Per draft length: the positions it holds and its cap, or why one sequence cannot
    // hold them.
    let spec_caps: Vec<(f64, std::result::Result<u32, String>)> = shapes
        .iter()
        .map(|d| {
            let held = ctx + d.k as f64;
            let cap = kv_seqs(held, draft_held)
                .map(|n| {
                    engine
                        .running_cap(drafts_a_model)
                        .min(n)
                        .min(verify_budget_cap(engine, *d))
                        .min(fitted_cap)
                })
                .map_err(|e| e.to_string());
            (held, cap)
        })
        .collect();
    let plain_cap = engine
        .running_cap(false)
        .min(kv_seqs(ctx, DraftResidency::NONE)?)
        .min(verify_budget_cap(engine, DraftShape::chain(0)))
        .min(fitted_cap);
    for &c in concurrency {
        let plain_running = c.max(1).min(plain_cap);
        let pf = plain_running as f64;
        // Both steps as the engine schedules them (`serve`'s rule): the CPU's fixed and
        // per-sequence work beside the GPU's kernels with overlap, after them without, and
        // an engine that turns its overlap off to speculate pays it in series then.
        let cpu = &engine.cpu;
        let overhead = s.params.step_overhead;
        let drafting = match draft {
            Draft::Mtp | Draft::Eagle | Draft::Eagle3 => crate::spec::engine::Drafting::Heads,
            Draft::Ngram { .. } | Draft::Model { .. } => crate::spec::engine::Drafting::Separate,
        };
        let spec_overlap = cpu.overlaps(s.parallel.pp, drafting);
        // Plain decoding's step at `n` sequences, as the engine schedules it.
        let plain_step = |n: f64| {
            cpu.engine_step(
                ev.step_time(&Pass::decode(n, ctx)),
                overhead,
                n,
                s.overlaps(),
            )
        };
        let base = plain_step(pf);
        baseline_tpot_ms.push((c, base * 1e3));
        let plain_throughput = pf / base;
        let mut best = BestK {
            concurrency: c,
            k: 0,
            speedup: 1.0,
        };
        for (shape, (held, cap)) in shapes.iter().zip(&spec_caps) {
            let k = shape.k;
            let running = match cap {
                Ok(cap) => c.max(1).min(*cap),
                Err(why) => {
                    refusal.get_or_insert_with(|| why.clone());
                    does_not_fit.push((c, format!("k = {k}: {why}")));
                    continue;
                }
            };
            let cf = running as f64;
            if let Err(e) = fits_speculating(s, cf, *held, draft_held) {
                refusal.get_or_insert_with(|| e.to_string());
                does_not_fit.push((c, format!("k = {k}: {e}")));
                continue;
            }
            let e = acceptance.expected_tokens(k as usize);
            let (draft_s, verify) = speculative_step(s, &ev, draft, *shape, e, cf, ctx)?;
            let step = cpu.engine_step(draft_s + verify, overhead, cf, spec_overlap);
            let tpot = step / e;
            let tpot_ci95_ms = s.interval("tpot", |q| {
                q.evaluator()
                    .and_then(|qe| speculative_step(q, &qe, draft, *shape, e, cf, ctx))
                    .map_or(f64::NAN, |(d, v)| {
                        cpu.engine_step(d + v, q.params.step_overhead, cf, spec_overlap) / e * 1e3
                    })
            });
            // Tokens per second over all C requests, speculating against not: the TPOT
            // ratio where both sides run the same number of sequences. Where speculation
            // runs fewer, against plain decoding at its own count or at the speculating
            // run's, whichever runs more tokens per second: a step need not grow in
            // proportion to its batch (whole sequences on a data-parallel replica, a wave
            // more of CTAs), and a plain engine capped at the smaller count would have that
            // gain too. A gain is speculation's, never a batch size's.
            let baseline = if running < plain_running {
                plain_throughput.max(cf / plain_step(cf))
            } else {
                plain_throughput
            };
            let speedup = (cf / tpot) / baseline;
            if speedup > best.speedup {
                best = BestK {
                    concurrency: c,
                    k,
                    speedup,
                };
            }
            points.push(SpecPoint {
                k,
                concurrency: c,
                running,
                plain_running,
                tpot_ms: tpot * 1e3,
                tpot_ci95_ms,
                throughput_tok_s: cf / tpot,
                speedup,
                expected_tokens_per_step: e,
                draft_ms: draft_s * 1e3,
                verify_ms: verify * 1e3,
                step_ms: step * 1e3,
            });
        }
        best_k.push(best);
    }
    // No concurrency can run: the reason, not an empty table.
    if points.is_empty() {
        if let Some(why) = refusal {
            return Err(Error::Scenario(why));
        }
    }
    Ok(SpecDec {
        model: s.model.name.clone(),
        system: s.system.spec.name.clone(),
        parallel: s.parallel.to_string(),
        draft: draft.name(),
        acceptance: acceptance.clone(),
        context,
        provenance: s.params.provenance.name(),
        breakeven: breakeven(&points, &baseline_tpot_ms),
        baseline_tpot_ms,
        points,
        best_k,
        does_not_fit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_formula_matches_monte_carlo() {
        let acc = Acceptance(vec![0.85, 0.6, 0.4, 0.3]);
        let mut state: u64 = 0x2545F4914F6CDD1D;
        let mut uniform = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for k in 1..=6usize {
            let n = 200_000;
            let mut total = 0u64;
            for _ in 0..n {
                let mut t = 1;
                for i in 0..k {
                    if uniform() < acc.at(i) {
                        t += 1;
                    } else {
                        break;
                    }
                }
                total += t;
            }
            let mc = total as f64 / n as f64;
            let f = acc.expected_tokens(k);
            assert!(
                (mc - f).abs() < 0.01,
                "k={k}: formula {f} vs Monte-Carlo {mc}"
            );
        }
        // constant α: (1 − α^{k+1}) / (1 − α)
        let a = Acceptance(vec![0.8]);
        assert!((a.expected_tokens(3) - (1.0 - 0.8f64.powi(4)) / 0.2).abs() < 1e-12);
    }

    #[test]
    fn rates_from_measured_lengths() {
        // accepted drafts per step: half accept 0, a quarter 1, a quarter 2
        let a = Acceptance::from_lengths(&[0, 0, 1, 2]).unwrap();
        assert!((a.0[0] - 0.5).abs() < 1e-12 && (a.0[1] - 0.5).abs() < 1e-12 && a.0[2] == 0.0);
        assert!((a.expected_tokens(4) - 1.75).abs() < 1e-12);
    }
}
