//! Model descriptions: architecture (field names as in the model's Hugging Face
//! `config.json`) and how each group of weights is stored.
//!
//! The cost model needs shapes, not weights: layer count, hidden size, attention form (MHA /
//! GQA / MLA), dense and expert MLP sizes, routing, and the storage format of each weight
//! group, because a 1-trillion-parameter MoE with INT4 experts and BF16 attention reads very
//! different bytes per token from the same model in FP8. Field names follow `config.json`
//! so a user can check a description against the published file.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The other names `[config]` reads a field under (serde aliases of [`ModelConfig`], as the
/// Hugging Face configs of other families spell them) and the field each stands for: a
/// `--set model.config.<alias>=…` sets that field, not a second key beside it.
pub const CONFIG_ALIASES: [(&str, &str); 4] = [
    ("num_experts", "n_routed_experts"),
    ("num_local_experts", "n_routed_experts"),
    ("experts_per_token", "num_experts_per_tok"),
    ("top_k_experts", "num_experts_per_tok"),
];

/// Architecture fields, named as in the model's `config.json`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub num_hidden_layers: u32,
    pub hidden_size: u32,
    pub num_attention_heads: u32,
    /// GQA key/value heads; equal to `num_attention_heads` (MHA) when absent.
    #[serde(default)]
    pub num_key_value_heads: Option<u32>,
    /// Per-head dimension; `hidden_size / num_attention_heads` when absent.
    #[serde(default)]
    pub head_dim: Option<u32>,
    /// MLA: rank of the query down-projection (absent: full-rank query projection).
    #[serde(default)]
    pub q_lora_rank: Option<u32>,
    /// MLA: rank of the latent KV; its presence makes the attention MLA.
    #[serde(default)]
    pub kv_lora_rank: Option<u32>,
    #[serde(default)]
    pub qk_nope_head_dim: Option<u32>,
    #[serde(default)]
    pub qk_rope_head_dim: Option<u32>,
    #[serde(default)]
    pub v_head_dim: Option<u32>,
    /// Dense MLP width; for models whose every layer is MoE without
    /// `moe_intermediate_size` (Mixtral, gpt-oss) it is the expert width.
    #[serde(default)]
    pub intermediate_size: Option<u32>,
    #[serde(default)]
    pub moe_intermediate_size: Option<u32>,
    /// Routed experts (`num_experts` in Qwen3-MoE, `num_local_experts` in Mixtral/gpt-oss).
    /// Every alias here is also in [`CONFIG_ALIASES`], which `--set` reads.
    #[serde(default, alias = "num_experts", alias = "num_local_experts")]
    pub n_routed_experts: Option<u32>,
    /// Experts each token is routed to (`experts_per_token` in gpt-oss).
    #[serde(default, alias = "experts_per_token", alias = "top_k_experts")]
    pub num_experts_per_tok: Option<u32>,
    #[serde(default)]
    pub n_shared_experts: Option<u32>,
    /// Leading dense layers before the MoE layers.
    #[serde(default)]
    pub first_k_dense_replace: Option<u32>,
    pub vocab_size: u32,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Multi-token-prediction layers shipped with the model (usable as a draft).
    #[serde(default)]
    pub num_nextn_predict_layers: Option<u32>,
    /// Sliding-window length of the layers that use one.
    #[serde(default)]
    pub sliding_window: Option<u32>,
    /// Per-layer attention kind (`"sliding_attention"` / `"full_attention"`), gpt-oss style.
    #[serde(default)]
    pub layer_types: Option<Vec<String>>,
    /// DeepSeek sparse attention (DSA): tokens each query attends to.
    #[serde(default)]
    pub index_topk: Option<u32>,
    #[serde(default)]
    pub index_n_heads: Option<u32>,
    #[serde(default)]
    pub index_head_dim: Option<u32>,
    /// DSA per layer (GLM-5.2 `indexer_types`): `"full"` runs its own indexer, `"shared"`
    /// reuses the previous indexer's top-k (no indexer weights, work or cache).
    #[serde(default)]
    pub indexer_types: Option<Vec<String>>,
    /// Per-layer feed-forward (GLM-5.2 `mlp_layer_types`): `"dense"`, `"sparse"` (MoE) or
    /// `"none"`. Absent: the first `first_k_dense_replace` layers dense, the rest MoE.
    #[serde(default)]
    pub mlp_layer_types: Option<Vec<String>>,
    /// Per-layer dense MLP width (DeciLM `block_configs`); 0 = no feed-forward in that layer.
    #[serde(default)]
    pub layer_intermediate_sizes: Option<Vec<u32>>,
    /// Per-layer K/V heads (DeciLM `n_heads_in_group`).
    #[serde(default)]
    pub layer_num_key_value_heads: Option<Vec<u32>>,
    /// Activation of the MLPs: `"relu2"` (Nemotron-H) is an ungated MLP (up, down); anything
    /// else (absent: SiLU) a gated one (gate, up, down).
    #[serde(default)]
    pub mlp_hidden_act: Option<String>,
    /// Width of the always-on shared expert(s) (Qwen `shared_expert_intermediate_size`,
    /// Nemotron-H `moe_shared_expert_intermediate_size`, Step `share_expert_dim`, Gemma-4's
    /// dense MLP beside its experts). Absent: `n_shared_experts × moe_intermediate_size`.
    #[serde(default)]
    pub shared_expert_intermediate_size: Option<u32>,
    /// LatentMoE (Nemotron-3 Super `moe_latent_size`): the routed experts work in a latent
    /// space of this width. Each MoE layer projects the hidden state down
    /// (`fc1_latent_proj`, hidden x latent), runs the experts on it (latent x
    /// `moe_intermediate_size` matrices), and projects their sum back up
    /// (`fc2_latent_proj`); the router and the shared expert stay at the hidden width.
    /// Absent: the experts read and write the hidden state itself.
    #[serde(default)]
    pub moe_latent_size: Option<u32>,
    /// Chunked-attention length of `chunked_attention` layers (Llama-4 `attention_chunk_size`).
    #[serde(default)]
    pub attention_chunk_size: Option<u32>,
    /// Queries carry an output gate (Qwen3.5/Qwen3-Next `attn_output_gate`): q_proj twice as wide.
    #[serde(default, skip_serializing_if = "is_false")]
    pub attn_output_gate: bool,
    /// Full-attention layers' head width where it differs from the sliding ones (Gemma-4).
    #[serde(default)]
    pub global_head_dim: Option<u32>,
    /// Full-attention layers' K/V heads where they differ (Gemma-4).
    #[serde(default)]
    pub num_global_key_value_heads: Option<u32>,
    /// Full-attention layers use one tensor as both keys and values (Gemma-4): no v_proj,
    /// one cached tensor.
    #[serde(default, skip_serializing_if = "is_false")]
    pub attention_k_eq_v: bool,
    /// Gated DeltaNet (`linear_attention` layers): key heads, value heads and their widths,
    /// and the causal convolution's length.
    #[serde(default)]
    pub linear_num_key_heads: Option<u32>,
    #[serde(default)]
    pub linear_num_value_heads: Option<u32>,
    #[serde(default)]
    pub linear_key_head_dim: Option<u32>,
    #[serde(default)]
    pub linear_value_head_dim: Option<u32>,
    #[serde(default)]
    pub linear_conv_kernel_dim: Option<u32>,
    /// Mamba-2 (`mamba` layers): SSM heads, head width, state size, B/C groups, conv length.
    #[serde(default)]
    pub mamba_num_heads: Option<u32>,
    #[serde(default)]
    pub mamba_head_dim: Option<u32>,
    #[serde(default)]
    pub ssm_state_size: Option<u32>,
    #[serde(default)]
    pub n_groups: Option<u32>,
    #[serde(default)]
    pub conv_kernel: Option<u32>,
    /// Element type of the recurrent state (`mamba_ssm_dtype` / `mamba_ssm_cache_dtype`;
    /// absent: fp32, what vLLM and the reference kernels keep).
    #[serde(default)]
    pub ssm_state_dtype: Option<KvDtype>,
    /// DeepSeek-V4: low-rank grouped output projection (`o_lora_rank`, `o_groups`) and the
    /// per-layer KV compression ratio (`compress_ratios`: 0 = sliding window only).
    #[serde(default)]
    pub o_lora_rank: Option<u32>,
    #[serde(default)]
    pub o_groups: Option<u32>,
    #[serde(default)]
    pub compress_ratios: Option<Vec<u32>>,
    /// The context window in tokens: the longest sequence (prompt plus output) the model's
    /// position encoding was trained and published for. Engines refuse longer requests
    /// (vLLM's `max_model_len` defaults to it), so rooftop refuses to price them. Absent: no
    /// window is checked.
    #[serde(default)]
    pub max_position_embeddings: Option<u32>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Storage format families of a weight group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FormatKind {
    /// BF16 or FP16.
    Bf16,
    /// FP8 e4m3 (per-tensor or block-scaled).
    Fp8,
    /// INT8 (W8A8).
    Int8,
    /// INT4 weight-only (W4A16) with group scales.
    Int4,
    /// NVFP4: e2m1 with one FP8 scale per 16 weights.
    Nvfp4,
    /// MXFP4: e2m1 with one E8M0 scale per 32 weights.
    Mxfp4,
}

impl FormatKind {
    pub const ALL: [FormatKind; 6] = [
        FormatKind::Bf16,
        FormatKind::Fp8,
        FormatKind::Int8,
        FormatKind::Int4,
        FormatKind::Nvfp4,
        FormatKind::Mxfp4,
    ];
    pub fn name(self) -> &'static str {
        match self {
            FormatKind::Bf16 => "bf16",
            FormatKind::Fp8 => "fp8",
            FormatKind::Int8 => "int8",
            FormatKind::Int4 => "int4",
            FormatKind::Nvfp4 => "nvfp4",
            FormatKind::Mxfp4 => "mxfp4",
        }
    }
}

/// One value per weight format: a map keyed by [`FormatKind`], exhaustive by construction.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PerFormat<T>([T; 6]);

impl<T: Copy> PerFormat<T> {
    /// The same value for every format.
    pub fn splat(v: T) -> Self {
        PerFormat([v; 6])
    }
    /// A value per format from `f`.
    pub fn from_fn(f: impl Fn(FormatKind) -> T) -> Self {
        PerFormat(FormatKind::ALL.map(f))
    }
    /// Every (format, value) pair.
    pub fn iter(&self) -> impl Iterator<Item = (FormatKind, T)> + '_ {
        FormatKind::ALL.iter().map(|k| (*k, self[*k]))
    }
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.0.iter_mut()
    }
}

impl<T> std::ops::Index<FormatKind> for PerFormat<T> {
    type Output = T;
    fn index(&self, k: FormatKind) -> &T {
        &self.0[k as usize]
    }
}

impl<T> std::ops::IndexMut<FormatKind> for PerFormat<T> {
    fn index_mut(&mut self, k: FormatKind) -> &mut T {
        &mut self.0[k as usize]
    }
}

impl<T: Serialize + Copy> Serialize for PerFormat<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(6))?;
        for (k, v) in self.iter() {
            m.serialize_entry(&k, &v)?;
        }
        m.end()
    }
}

/// A weight storage format with its scale overhead.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WeightFormat {
    pub kind: FormatKind,
    /// Weights sharing one scale (0: per-tensor or per-channel, negligible).
    pub group_size: u32,
    /// Bits per scale.
    pub scale_bits: u32,
}

impl WeightFormat {
    pub const BF16: WeightFormat = WeightFormat {
        kind: FormatKind::Bf16,
        group_size: 0,
        scale_bits: 0,
    };

    /// Storage bits per weight, scales included (INT4 g32 with BF16 scales: 4 + 16/32 = 4.5).
    pub fn bits_per_weight(&self) -> f64 {
        let base = match self.kind {
            FormatKind::Bf16 => 16.0,
            FormatKind::Fp8 | FormatKind::Int8 => 8.0,
            FormatKind::Int4 | FormatKind::Nvfp4 | FormatKind::Mxfp4 => 4.0,
        };
        if self.group_size == 0 {
            base
        } else {
            base + self.scale_bits as f64 / self.group_size as f64
        }
    }

    pub fn bytes_per_weight(&self) -> f64 {
        self.bits_per_weight() / 8.0
    }

    /// Edge of the square weight blocks that share one scale (128 for `fp8-block128`);
    /// `None` for per-tensor, per-channel or per-group (1-D) scales.
    pub fn block_edge(&self) -> Option<u32> {
        (self.kind == FormatKind::Fp8 && self.group_size > 0)
            .then(|| (self.group_size as f64).sqrt().round() as u32)
    }
}

impl FromStr for WeightFormat {
    type Err = String;
    /// `bf16`, `fp16`, `fp8`, `fp8-block128` (128×128 FP32 block scales), `int8`, `int4-gN`
    /// (W4A16, BF16 scale per N weights), `int4-gN-zp` (plus a 4-bit zero point per group:
    /// GPTQ asymmetric, AWQ), `int4-channel` (one scale per output channel), `nvfp4`, `mxfp4`.
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        let f = |kind, group_size, scale_bits| WeightFormat {
            kind,
            group_size,
            scale_bits,
        };
        Ok(match t.as_str() {
            "bf16" | "fp16" => f(FormatKind::Bf16, 0, 0),
            "fp8" => f(FormatKind::Fp8, 0, 0),
            "fp8-block128" => f(FormatKind::Fp8, 128 * 128, 32),
            "int8" => f(FormatKind::Int8, 0, 0),
            "nvfp4" => f(FormatKind::Nvfp4, 16, 8),
            "mxfp4" => f(FormatKind::Mxfp4, 32, 8),
            "int4-channel" => f(FormatKind::Int4, 0, 0),
            _ => {
                if let Some(g) = t.strip_prefix("int4-g").and_then(|g| g.strip_suffix("-zp")) {
                    let g: u32 =
                        g.parse().ok().filter(|g| *g > 0).ok_or_else(|| {
                            format!("\"{s}\": group size must be a positive integer")
                        })?;
                    f(FormatKind::Int4, g, 20)
                } else if let Some(g) = t.strip_prefix("int4-g") {
                    let g: u32 =
                        g.parse().ok().filter(|g| *g > 0).ok_or_else(|| {
                            format!("\"{s}\": group size must be a positive integer")
                        })?;
                    f(FormatKind::Int4, g, 16)
                } else {
                    return Err(format!(
                        "unknown weight format \"{s}\"; expected one of bf16, fp16, fp8, fp8-block128, int8, int4-g32, int4-g128, nvfp4, mxfp4"
                    ));
                }
            }
        })
    }
}

impl fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            FormatKind::Int4 if self.group_size == 0 => write!(f, "int4-channel"),
            FormatKind::Int4 if self.scale_bits > 16 => {
                write!(f, "int4-g{}-zp", self.group_size)
            }
            FormatKind::Int4 => write!(f, "int4-g{}", self.group_size),
            FormatKind::Fp8 if self.group_size > 0 => write!(f, "fp8-block128"),
            k => write!(f, "{}", k.name()),
        }
    }
}

impl<'de> Deserialize<'de> for WeightFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for WeightFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// KV-cache element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KvDtype {
    Bf16,
    Fp16,
    Fp8,
    /// 32-bit float (recurrent state of linear-attention and SSM layers).
    Fp32,
}

impl KvDtype {
    pub fn bytes(self) -> f64 {
        match self {
            KvDtype::Bf16 | KvDtype::Fp16 => 2.0,
            KvDtype::Fp8 => 1.0,
            KvDtype::Fp32 => 4.0,
        }
    }
}

/// Storage format per weight group. `default` applies to the linear layers inside decoder
/// layers not named here; embedding, lm_head and router are BF16 unless named.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QuantSpec {
    pub default: WeightFormat,
    #[serde(default)]
    pub attention: Option<WeightFormat>,
    #[serde(default)]
    pub dense_mlp: Option<WeightFormat>,
    #[serde(default)]
    pub shared_experts: Option<WeightFormat>,
    #[serde(default)]
    pub routed_experts: Option<WeightFormat>,
    #[serde(default)]
    pub lm_head: Option<WeightFormat>,
    #[serde(default)]
    pub embedding: Option<WeightFormat>,
    #[serde(default)]
    pub router: Option<WeightFormat>,
    pub kv_cache: KvDtype,
}

impl QuantSpec {
    pub fn attention(&self) -> WeightFormat {
        self.attention.unwrap_or(self.default)
    }
    pub fn dense_mlp(&self) -> WeightFormat {
        self.dense_mlp.unwrap_or(self.default)
    }
    pub fn shared_experts(&self) -> WeightFormat {
        self.shared_experts.unwrap_or(self.default)
    }
    pub fn routed_experts(&self) -> WeightFormat {
        self.routed_experts.unwrap_or(self.default)
    }
    pub fn lm_head(&self) -> WeightFormat {
        self.lm_head.unwrap_or(WeightFormat::BF16)
    }
    pub fn embedding(&self) -> WeightFormat {
        self.embedding.unwrap_or(WeightFormat::BF16)
    }
    pub fn router(&self) -> WeightFormat {
        self.router.unwrap_or(WeightFormat::BF16)
    }
}

/// A draft head the model can be paired with for speculative decoding (EAGLE-style: one
/// decoder layer on the target's hidden states, and an lm_head).
///
/// EAGLE-1/2 heads project through the target's own lm_head (its whole vocabulary);
/// EAGLE-3 heads carry their own over a reduced draft vocabulary (`draft_vocab_size`), and
/// their decoder layer is a plain Llama layer whatever the target's attention is (a
/// Kimi-K2.5 head attends with 64 query and 64 key/value heads where the target runs MLA):
/// `num_attention_heads`, `num_key_value_heads` and `head_dim` say so. The layer keeps a KV
/// cache of its own over the whole sequence, beside the target's.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DraftHeadSpec {
    /// Decoder layers in the head (EAGLE-3: 1).
    pub num_layers: u32,
    /// MLP width of the head's decoder layer.
    pub intermediate_size: u32,
    /// Storage of the head's weights.
    pub format: WeightFormat,
    /// Size of the EAGLE-3 head's own lm_head vocabulary (0: the target's). An EAGLE-1/2
    /// draft always uses the target's.
    #[serde(default)]
    pub draft_vocab_size: u32,
    /// Query heads of the head's attention (absent: the target's attention, MLA included).
    #[serde(default)]
    pub num_attention_heads: Option<u32>,
    /// Its key/value heads (absent: as many as query heads, MHA).
    #[serde(default)]
    pub num_key_value_heads: Option<u32>,
    /// Its per-head width (absent: `hidden_size / num_attention_heads`).
    #[serde(default)]
    pub head_dim: Option<u32>,
}

impl DraftHeadSpec {
    /// The head's own attention shape (query heads, key/value heads, head width) where it
    /// states one; `None`: the head attends as the target does.
    pub fn attention(&self, hidden_size: u32) -> Option<(u32, u32, u32)> {
        let q = self.num_attention_heads?;
        Some((
            q,
            self.num_key_value_heads.unwrap_or(q),
            self.head_dim.unwrap_or(hidden_size / q.max(1)),
        ))
    }
}

/// Token-mixer kinds `layer_types` may name (`deepseek_sparse_attention` is full attention
/// with the model's DSA indexer).
pub const LAYER_TYPES: &[&str] = &[
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "deepseek_sparse_attention",
    "linear_attention",
    "mamba",
    "none",
];

/// Most decoder layers a description may have (see [`ModelSpec::validate`]).
pub const MAX_LAYERS: u32 = 10_000;

/// Plausible range of a model dimension, and why: the widest published models are 16,384 to
/// 25,600 wide, with MLPs under 100,000, 128 query heads, head sizes of 256 and vocabularies
/// under 300,000 tokens. The ranges leave an order of magnitude and more of room, and refuse
/// only what is a typo or a unit slip (`hidden_size` 1e15): such a width is accepted by the
/// arithmetic and predicts petabytes per token without a word. `None` for a field with no
/// such range. Files, `--set` and `import-hf` are checked against the same table.
pub fn plausible_range(field: &str) -> Option<(u32, u32, &'static str)> {
    const WIDTH: &str = "published models are under 30,000 wide";
    Some(match field.trim_start_matches("config.") {
        "hidden_size" => (1, 1 << 20, WIDTH),
        "intermediate_size" | "moe_intermediate_size" => {
            // 0: no MLP of that kind (checked against the layers that need one below).
            (0, 1 << 22, "published MLPs are under 100,000 wide")
        }
        "num_attention_heads" | "num_key_value_heads" => (
            1,
            1 << 16,
            "published models have at most a few hundred heads",
        ),
        "head_dim" => (1, 1 << 16, "published head sizes are at most 512"),
        "qk_nope_head_dim" | "qk_rope_head_dim" | "v_head_dim" => {
            (0, 1 << 16, "published MLA head parts are at most 192 wide")
        }
        "q_lora_rank" | "kv_lora_rank" => (
            0,
            1 << 20,
            "published latent ranks are at most a few thousand",
        ),
        "n_shared_experts" => (
            0,
            1 << 10,
            "published models have at most a few shared experts",
        ),
        "shared_expert_intermediate_size" => (0, 1 << 22, "published MLPs are under 100,000 wide"),
        "vocab_size" => (
            1,
            1 << 24,
            "published vocabularies are under 300,000 tokens",
        ),
        _ => return None,
    })
}

/// What [`plausible_range`] expects of `field`, for messages.
pub fn plausible_text(field: &str) -> Option<String> {
    plausible_range(field).map(|(lo, hi, why)| format!("a value from {lo} to {hi} ({why})"))
}

/// One model, read 1:1 from `configs/models/<name>.toml`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub name: String,
    pub full_name: String,
    /// `architectures[0]` from config.json.
    pub architecture: String,
    /// Total parameters as published (count), for the reader and the tests.
    #[serde(default)]
    pub published_total_params: Option<f64>,
    /// Active parameters per token as published (count).
    #[serde(default)]
    pub published_active_params: Option<f64>,
    pub config: ModelConfig,
    pub quantization: QuantSpec,
    /// How tokens spread over the routed experts (`balanced`: uniform random picks;
    /// `round-robin`: picks dealt evenly; or `power-law A`); the busiest expert-parallel rank
    /// sets an MoE layer's time. Default balanced.
    #[serde(default)]
    pub routing: crate::ops::routing::Routing,
    #[serde(default)]
    pub eagle_head: Option<DraftHeadSpec>,
    /// The vision encoder of a vision-language model (prefill-time cost only).
    #[serde(default)]
    pub vision: Option<VisionSpec>,
    pub sources: BTreeMap<String, String>,
}

/// A ViT-style vision encoder, field names as in the model's `vision_config`: what it costs
/// at prefill time, per image. Decode never runs it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VisionSpec {
    /// Transformer blocks (`depth` / `num_hidden_layers`).
    pub depth: u32,
    pub hidden_size: u32,
    pub intermediate_size: u32,
    pub num_heads: u32,
    pub patch_size: u32,
    /// Patches merged into one language-model token per side (Qwen-VL 2; 1: none).
    #[serde(default = "one")]
    pub spatial_merge_size: u32,
    /// Width the merger projects to (the language model's hidden size).
    pub out_hidden_size: u32,
    /// Frames per temporal patch (Qwen-VL video: 2; images repeat the frame).
    #[serde(default = "one")]
    pub temporal_patch_size: u32,
    /// Extra mergers feeding intermediate features to the language model (Qwen3-VL
    /// `deepstack_visual_indexes`).
    #[serde(default)]
    pub deepstack_mergers: u32,
}

fn one() -> u32 {
    1
}

impl VisionSpec {
    /// Weight elements: per block attention (4 h²) and an ungated MLP (2 h × inter), the
    /// patch embedding (3 channels × temporal × patch² × h) and the merger MLP (h m² → h m²
    /// → out, once more per deepstack merger).
    pub fn params(&self) -> f64 {
        let h = self.hidden_size as f64;
        let i = self.intermediate_size as f64;
        let p = self.patch_size as f64;
        let m2 = (self.spatial_merge_size as f64).powi(2);
        let block = 4.0 * h * h + 2.0 * h * i;
        let patch = 3.0 * self.temporal_patch_size as f64 * p * p * h;
        let merger = (h * m2) * (h * m2) + h * m2 * self.out_hidden_size as f64;
        self.depth as f64 * block + patch + merger * (1.0 + self.deepstack_mergers as f64)
    }

    /// FLOPs to encode one image of `patches` patches: the weights once per patch (2 FLOP
    /// each) and full attention among the patches in every block.
    pub fn flops_per_image(&self, patches: f64) -> f64 {
        let h = self.hidden_size as f64;
        2.0 * self.params() * patches + self.depth as f64 * 4.0 * patches * patches * h
    }
}

/// Attention form, derived from which fields are present.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Attention {
    /// Multi-head latent attention (DeepSeek-V2/V3 family).
    Mla {
        q_lora_rank: Option<u32>,
        kv_lora_rank: u32,
        nope: u32,
        rope: u32,
        v: u32,
    },
    /// Grouped-query (or multi-head when kv_heads = heads) attention.
    Gqa { kv_heads: u32, head_dim: u32 },
    /// DeepSeek-V4 style: one shared K/V head of `head_dim` (rotary part included), a
    /// low-rank query, a grouped low-rank output, and per-layer KV compression.
    Compressed {
        q_lora_rank: u32,
        head_dim: u32,
        o_lora_rank: u32,
        o_groups: u32,
    },
}

/// The token mixer of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mixer {
    /// Softmax attention (the model's form: GQA, MLA or compressed); `window` bounds the
    /// attended and cached span (sliding window, or a chunk when `chunked`).
    Attention { window: Option<u32>, chunked: bool },
    /// Gated DeltaNet linear attention: a fixed-size state per sequence.
    Linear,
    /// Mamba-2 selective state space: a fixed-size state per sequence.
    Mamba,
    /// No token mixer (DeciLM skipped attention; Nemotron-H MLP-only layers).
    None,
}

/// The feed-forward of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ffn {
    Dense { width: u32 },
    Moe,
    None,
}

/// MoE shape, when the model has routed experts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moe {
    pub experts: u32,
    pub top_k: u32,
    pub shared: u32,
    pub expert_intermediate: u32,
}

/// MLP activations (`mlp_hidden_act`, HF names) whose MLP is ungated: up, activation, down,
/// two matrices (`relu2`: Nemotron-H). Any other activation is gated: gate, up, down.
pub const UNGATED_ACTIVATIONS: &[&str] = &["relu2", "relu", "gelu_new"];

impl ModelSpec {
    pub fn attention(&self) -> Attention {
        let c = &self.config;
        if c.compress_ratios.is_some() {
            let hd = c
                .head_dim
                .unwrap_or(c.hidden_size / c.num_attention_heads.max(1));
            return Attention::Compressed {
                q_lora_rank: c.q_lora_rank.unwrap_or(c.hidden_size),
                head_dim: hd,
                o_lora_rank: c.o_lora_rank.unwrap_or(c.hidden_size),
                o_groups: c.o_groups.unwrap_or(1).max(1),
            };
        }
        match c.kv_lora_rank {
            Some(kv) => Attention::Mla {
                q_lora_rank: c.q_lora_rank,
                kv_lora_rank: kv,
                nope: c.qk_nope_head_dim.unwrap_or(128),
                rope: c.qk_rope_head_dim.unwrap_or(64),
                v: c.v_head_dim.unwrap_or(128),
            },
            None => Attention::Gqa {
                kv_heads: c.num_key_value_heads.unwrap_or(c.num_attention_heads),
                head_dim: c
                    .head_dim
                    .unwrap_or(c.hidden_size / c.num_attention_heads.max(1)),
            },
        }
    }

    pub fn moe(&self) -> Option<Moe> {
        let c = &self.config;
        let experts = c.n_routed_experts?;
        Some(Moe {
            experts,
            top_k: c.num_experts_per_tok.unwrap_or(1),
            shared: c.n_shared_experts.unwrap_or(0),
            expert_intermediate: c.moe_intermediate_size.or(c.intermediate_size).unwrap_or(0),
        })
    }
    /// The weight formats the model's layers store: attention and the LM head always, the
    /// dense MLP where there are dense layers, routed experts where there are experts and
    /// shared experts where there are any. What a GPU must be able to run.
    pub fn weight_formats(&self) -> Vec<WeightFormat> {
        let q = &self.quantization;
        let mut formats = vec![q.attention(), q.lm_head()];
        if self.dense_layers() > 0 {
            formats.push(q.dense_mlp());
        }
        if let Some(m) = self.moe() {
            formats.push(q.routed_experts());
            if m.shared > 0 {
                formats.push(q.shared_experts());
            }
        }
        formats
    }

    /// Layers with a dense MLP.
    pub fn dense_layers(&self) -> u32 {
        (0..self.config.num_hidden_layers)
            .filter(|i| matches!(self.ffn_of_layer(*i), Ffn::Dense { .. }))
            .count() as u32
    }

    pub fn moe_layers(&self) -> u32 {
        (0..self.config.num_hidden_layers)
            .filter(|i| self.ffn_of_layer(*i) == Ffn::Moe)
            .count() as u32
    }

    /// Whether layer `i` attends over a bounded span (sliding window or chunk), and its length.
    pub fn window_of_layer(&self, i: u32) -> Option<u32> {
        match self.mixer_of_layer(i) {
            Mixer::Attention { window, .. } => window,
            _ => None,
        }
    }

    /// The token mixer layer `i` runs, from `layer_types` (absent: every layer the model's
    /// attention, sliding when `sliding_window` is given without a list, as Mistral does).
    pub fn mixer_of_layer(&self, i: u32) -> Mixer {
        let c = &self.config;
        let t = c
            .layer_types
            .as_ref()
            .and_then(|v| v.get(i as usize))
            .map(String::as_str);
        let full = Mixer::Attention {
            window: None,
            chunked: false,
        };
        match t {
            None if c.layer_types.is_none() => match c.sliding_window {
                Some(w) => Mixer::Attention {
                    window: Some(w),
                    chunked: false,
                },
                None => full,
            },
            Some("sliding_attention") => match c.sliding_window {
                Some(w) => Mixer::Attention {
                    window: Some(w),
                    chunked: false,
                },
                None => full,
            },
            Some("chunked_attention") => match c.attention_chunk_size {
                Some(w) => Mixer::Attention {
                    window: Some(w),
                    chunked: true,
                },
                None => full,
            },
            Some("linear_attention") => Mixer::Linear,
            Some("mamba") => Mixer::Mamba,
            Some("none") => Mixer::None,
            _ => full,
        }
    }

    /// Whether layer `i` is a full-attention layer with the global shapes (Gemma-4).
    pub fn is_global_layer(&self, i: u32) -> bool {
        self.config.layer_types.is_some()
            && matches!(
                self.mixer_of_layer(i),
                Mixer::Attention { window: None, .. }
            )
    }

    /// The feed-forward layer `i` runs, from `mlp_layer_types` / `layer_intermediate_sizes`
    /// (absent: the first `first_k_dense_replace` layers dense, the rest MoE when the model
    /// has experts).
    pub fn ffn_of_layer(&self, i: u32) -> Ffn {
        let c = &self.config;
        let dense_width = c
            .layer_intermediate_sizes
            .as_ref()
            .and_then(|v| v.get(i as usize).copied())
            .or(c.intermediate_size)
            .unwrap_or(0);
        let dense = if dense_width == 0 {
            Ffn::None
        } else {
            Ffn::Dense { width: dense_width }
        };
        if let Some(t) = c.mlp_layer_types.as_ref().and_then(|v| v.get(i as usize)) {
            return match t.as_str() {
                "sparse" | "moe" if self.moe().is_some() => Ffn::Moe,
                "none" => Ffn::None,
                _ => dense,
            };
        }
        match self.moe() {
            Some(_) if i >= c.first_k_dense_replace.unwrap_or(0) => Ffn::Moe,
            _ => dense,
        }
    }

    /// Whether layer `i` runs its own DSA indexer (false when it reuses another's top-k).
    pub fn runs_indexer(&self, i: u32) -> bool {
        let c = &self.config;
        if c.index_topk.is_none() {
            return false;
        }
        if let Some(r) = &c.compress_ratios {
            // DeepSeek-V4: the indexer selects among compressed entries of ratio-4 layers.
            return r.get(i as usize).is_some_and(|r| *r > 0 && *r < 16);
        }
        match c.indexer_types.as_ref().and_then(|v| v.get(i as usize)) {
            Some(t) => t.as_str() != "shared",
            None => true,
        }
    }

    /// DeepSeek-V4 KV compression ratio of layer `i` (0: uncompressed / none).
    pub fn compress_ratio(&self, i: u32) -> u32 {
        self.config
            .compress_ratios
            .as_ref()
            .and_then(|v| v.get(i as usize).copied())
            .unwrap_or(0)
    }

    /// Multi-token-prediction layers shipped beside the decoder (weights, not per-token cost).
    pub fn mtp_layers(&self) -> u32 {
        self.config.num_nextn_predict_layers.unwrap_or(0)
    }

    /// Weight matrices of one MLP: 3 when gated (gate, up, down), 2 for an activation in
    /// [`UNGATED_ACTIVATIONS`] (up, down).
    pub fn mlp_matrices(&self) -> u32 {
        match self.config.mlp_hidden_act.as_deref() {
            Some(a) if UNGATED_ACTIVATIONS.contains(&a) => 2,
            _ => 3,
        }
    }

    /// Width of the always-on shared expert path of an MoE layer (0: none).
    pub fn shared_expert_width(&self) -> u32 {
        let c = &self.config;
        // In u64 and saturated: a description is checked against `plausible_range` only
        // after the importer has read it through this.
        c.shared_expert_intermediate_size.unwrap_or_else(|| {
            let w = u64::from(c.n_shared_experts.unwrap_or(0))
                * u64::from(c.moe_intermediate_size.or(c.intermediate_size).unwrap_or(0));
            u32::try_from(w).unwrap_or(u32::MAX)
        })
    }

    /// Gated DeltaNet: (key heads, value heads, key width, value width, conv length).
    pub fn gdn_dims(&self) -> (f64, f64, f64, f64, f64) {
        let c = &self.config;
        let nk = c.linear_num_key_heads.unwrap_or(16) as f64;
        (
            nk,
            c.linear_num_value_heads.map_or(nk, |v| v as f64),
            c.linear_key_head_dim.unwrap_or(128) as f64,
            c.linear_value_head_dim.unwrap_or(128) as f64,
            c.linear_conv_kernel_dim.unwrap_or(4) as f64,
        )
    }

    /// Mamba-2: (heads, head width, state size, B/C groups, conv length).
    pub fn mamba_dims(&self) -> (f64, f64, f64, f64, f64) {
        let c = &self.config;
        (
            c.mamba_num_heads.unwrap_or(0) as f64,
            c.mamba_head_dim.unwrap_or(64) as f64,
            c.ssm_state_size.unwrap_or(128) as f64,
            c.n_groups.unwrap_or(1) as f64,
            c.conv_kernel.unwrap_or(4) as f64,
        )
    }

    /// (K/V heads, head width) of the GQA attention in layer `i`: the global shapes on
    /// Gemma-4's full layers, DeciLM's per-layer K/V heads.
    pub fn gqa_shape_of_layer(&self, i: u32) -> (u32, u32) {
        let c = &self.config;
        let (mut kv, mut hd) = match self.attention() {
            Attention::Gqa { kv_heads, head_dim } => (kv_heads, head_dim),
            _ => (0, 0),
        };
        if let Some(v) = c
            .layer_num_key_value_heads
            .as_ref()
            .and_then(|v| v.get(i as usize))
        {
            kv = *v;
        }
        if self.is_global_layer(i) {
            kv = c.num_global_key_value_heads.unwrap_or(kv);
            hd = c.global_head_dim.unwrap_or(hd);
        }
        (kv, hd)
    }

    /// KV-cache bytes one token occupies across the attention layers whose cache grows with
    /// the context (on one replica of the cache). Sliding and chunked layers hold at most
    /// their window, linear-attention and SSM layers a fixed state: neither is counted here
    /// (see `cost::memory` for the whole footprint).
    pub fn kv_bytes_per_token(&self) -> f64 {
        let b = self.quantization.kv_cache.bytes();
        (0..self.config.num_hidden_layers)
            .filter(|i| {
                matches!(
                    self.mixer_of_layer(*i),
                    Mixer::Attention { window: None, .. }
                )
            })
            .map(|i| {
                let per_layer = match self.attention() {
                    Attention::Mla {
                        kv_lora_rank, rope, ..
                    } => (kv_lora_rank + rope) as f64 * b,
                    Attention::Gqa { .. } => {
                        let (kv, d) = self.gqa_shape_of_layer(i);
                        let tensors = if self.config.attention_k_eq_v && self.is_global_layer(i) {
                            1.0
                        } else {
                            2.0
                        };
                        tensors * kv as f64 * d as f64 * b
                    }
                    Attention::Compressed { head_dim, .. } => {
                        let r = self.compress_ratio(i);
                        if r == 0 {
                            0.0
                        } else {
                            head_dim as f64 * b / r as f64
                        }
                    }
                };
                per_layer + self.index_key_bytes(i)
            })
            .sum()
    }

    /// DSA indexer key bytes one token occupies in layer `i`: FP8 keys plus one FP32 scale
    /// per token (vLLM's and SGLang's indexer cache layout), whatever the KV dtype.
    pub fn index_key_bytes(&self, i: u32) -> f64 {
        match self.config.index_head_dim {
            Some(d) if self.runs_indexer(i) => {
                let per = d as f64 + 4.0;
                match self.compress_ratio(i) {
                    0 => per,
                    r => per / r as f64,
                }
            }
            _ => 0.0,
        }
    }

    /// Check the constraints serde cannot express; returns (field, what was expected).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let c = &self.config;
        let pos = |v: u32, f: &str| -> Result<(), (String, String)> {
            if v == 0 {
                Err((format!("config.{f}"), "a positive integer".into()))
            } else {
                Ok(())
            }
        };
        for (v, f) in [
            (self.published_total_params, "published_total_params"),
            (self.published_active_params, "published_active_params"),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                return Err((f.into(), "a parameter count of zero or more".into()));
            }
        }
        pos(c.num_hidden_layers, "num_hidden_layers")?;
        // The evaluator keeps one entry per layer and walks them every pass: a count read
        // from a typo (4294967295) would take gigabytes and minutes. Published models have
        // under 200 layers.
        if c.num_hidden_layers > MAX_LAYERS {
            return Err((
                "config.num_hidden_layers".into(),
                format!("at most {MAX_LAYERS} layers"),
            ));
        }
        pos(c.hidden_size, "hidden_size")?;
        pos(c.num_attention_heads, "num_attention_heads")?;
        pos(c.vocab_size, "vocab_size")?;
        if let Some(w) = c.max_position_embeddings {
            pos(w, "max_position_embeddings")?;
        }
        for (v, f) in [
            (Some(c.hidden_size), "hidden_size"),
            (c.intermediate_size, "intermediate_size"),
            (c.moe_intermediate_size, "moe_intermediate_size"),
            (Some(c.num_attention_heads), "num_attention_heads"),
            (c.num_key_value_heads, "num_key_value_heads"),
            (c.head_dim, "head_dim"),
            (Some(c.vocab_size), "vocab_size"),
            (c.qk_nope_head_dim, "qk_nope_head_dim"),
            (c.qk_rope_head_dim, "qk_rope_head_dim"),
            (c.v_head_dim, "v_head_dim"),
            (c.q_lora_rank, "q_lora_rank"),
            (c.kv_lora_rank, "kv_lora_rank"),
            (c.n_shared_experts, "n_shared_experts"),
            (
                c.shared_expert_intermediate_size,
                "shared_expert_intermediate_size",
            ),
        ] {
            let (lo, hi, _) = plausible_range(f).expect("a ranged field");
            if let Some(v) = v.filter(|v| !(lo..=hi).contains(v)) {
                let expected = plausible_text(f).expect("a ranged field");
                return Err((format!("config.{f}"), format!("{expected}, got {v}")));
            }
        }
        if let Some(kv) = c.num_key_value_heads {
            pos(kv, "num_key_value_heads")?;
            if !c.num_attention_heads.is_multiple_of(kv) {
                return Err((
                    "config.num_key_value_heads".into(),
                    format!(
                        "a divisor of num_attention_heads ({})",
                        c.num_attention_heads
                    ),
                ));
            }
        }
        if let Some(e) = c.n_routed_experts {
            pos(e, "n_routed_experts")?;
            let k = c.num_experts_per_tok.ok_or_else(|| {
                (
                    "config.num_experts_per_tok".to_string(),
                    "the number of experts per token for a model with n_routed_experts".to_string(),
                )
            })?;
            pos(k, "num_experts_per_tok")?;
            if k > e {
                return Err((
                    "config.num_experts_per_tok".into(),
                    format!("at most n_routed_experts ({e}), got {k}"),
                ));
            }
            if let Some(l) = c.moe_latent_size {
                pos(l, "moe_latent_size")?;
            }
            if c.moe_intermediate_size.or(c.intermediate_size).unwrap_or(0) == 0 {
                return Err((
                    "config.moe_intermediate_size".into(),
                    "the expert MLP width (or intermediate_size)".into(),
                ));
            }
        }
        if c.layer_intermediate_sizes.is_none()
            && c.intermediate_size.unwrap_or(0) == 0
            && (0..c.num_hidden_layers).any(|i| match &c.mlp_layer_types {
                Some(t) => t.get(i as usize).is_some_and(|t| t == "dense"),
                None => self.moe().is_none() || i < c.first_k_dense_replace.unwrap_or(0),
            })
        {
            return Err((
                "config.intermediate_size".into(),
                "the dense MLP width".into(),
            ));
        }
        if let Some(f) = c.first_k_dense_replace {
            if f > c.num_hidden_layers {
                return Err((
                    "config.first_k_dense_replace".into(),
                    format!("at most num_hidden_layers ({})", c.num_hidden_layers),
                ));
            }
        }
        let per_layer = |name: &str, len: Option<usize>| -> Result<(), (String, String)> {
            match len {
                Some(n) if n != c.num_hidden_layers as usize => Err((
                    format!("config.{name}"),
                    format!("one entry per layer ({}), got {n}", c.num_hidden_layers),
                )),
                _ => Ok(()),
            }
        };
        per_layer("layer_types", c.layer_types.as_ref().map(Vec::len))?;
        per_layer("mlp_layer_types", c.mlp_layer_types.as_ref().map(Vec::len))?;
        per_layer("indexer_types", c.indexer_types.as_ref().map(Vec::len))?;
        per_layer(
            "layer_intermediate_sizes",
            c.layer_intermediate_sizes.as_ref().map(Vec::len),
        )?;
        per_layer(
            "layer_num_key_value_heads",
            c.layer_num_key_value_heads.as_ref().map(Vec::len),
        )?;
        // compress_ratios may carry one more entry, for the MTP layer.
        if let Some(r) = &c.compress_ratios {
            if r.len() < c.num_hidden_layers as usize {
                return Err((
                    "config.compress_ratios".into(),
                    format!("at least one entry per layer ({})", c.num_hidden_layers),
                ));
            }
        }
        let one_of = |name: &str, v: &Option<Vec<String>>, ok: &[&str]| match v
            .as_ref()
            .and_then(|v| v.iter().find(|t| !ok.contains(&t.as_str())))
        {
            Some(bad) => Err((
                format!("config.{name}"),
                format!("one of {} per layer, got \"{bad}\"", ok.join(", ")),
            )),
            None => Ok(()),
        };
        one_of("layer_types", &c.layer_types, LAYER_TYPES)?;
        one_of(
            "mlp_layer_types",
            &c.mlp_layer_types,
            &["dense", "sparse", "moe", "none"],
        )?;
        one_of("indexer_types", &c.indexer_types, &["full", "shared"])?;
        if let Some(types) = &c.layer_types {
            let has = |k: &str| types.iter().any(|t| t == k);
            if has("linear_attention") {
                for (v, f) in [
                    (c.linear_num_key_heads, "linear_num_key_heads"),
                    (c.linear_key_head_dim, "linear_key_head_dim"),
                    (c.linear_value_head_dim, "linear_value_head_dim"),
                ] {
                    match v {
                        Some(v) => pos(v, f)?,
                        None => {
                            return Err((
                                format!("config.{f}"),
                                "a Gated DeltaNet dimension (linear_attention layers need it)"
                                    .into(),
                            ))
                        }
                    }
                }
            }
            if has("mamba") {
                for (v, f) in [
                    (c.mamba_num_heads, "mamba_num_heads"),
                    (c.mamba_head_dim, "mamba_head_dim"),
                    (c.ssm_state_size, "ssm_state_size"),
                ] {
                    match v {
                        Some(v) => pos(v, f)?,
                        None => {
                            return Err((
                                format!("config.{f}"),
                                "a Mamba-2 dimension (mamba layers need it)".into(),
                            ))
                        }
                    }
                }
            }
            if has("chunked_attention") {
                match c.attention_chunk_size {
                    Some(v) => pos(v, "attention_chunk_size")?,
                    None => {
                        return Err((
                            "config.attention_chunk_size".into(),
                            "the chunk length (chunked_attention layers need it)".into(),
                        ))
                    }
                }
            }
        }
        for (v, f) in [
            (c.linear_num_value_heads, "linear_num_value_heads"),
            (c.global_head_dim, "global_head_dim"),
            (c.num_global_key_value_heads, "num_global_key_value_heads"),
            (c.o_lora_rank, "o_lora_rank"),
            (c.o_groups, "o_groups"),
            (c.n_groups, "n_groups"),
            (c.sliding_window, "sliding_window"),
        ] {
            if let Some(v) = v {
                pos(v, f)?;
            }
        }
        if let Some(v) = &c.layer_num_key_value_heads {
            if let Some(bad) = v
                .iter()
                .find(|k| **k == 0 || !c.num_attention_heads.is_multiple_of(**k))
            {
                return Err((
                    "config.layer_num_key_value_heads".into(),
                    format!(
                        "divisors of num_attention_heads ({}), got {bad}",
                        c.num_attention_heads
                    ),
                ));
            }
        }
        // A DSA indexer is priced from its heads and head size, and its key cache from the
        // head size: a model that names the indexer gives both, or it would be priced with
        // an invented indexer and no cache for it.
        if c.index_topk.is_some() {
            for (v, f) in [
                (c.index_n_heads, "index_n_heads"),
                (c.index_head_dim, "index_head_dim"),
            ] {
                if v.is_none() {
                    return Err((
                        format!("config.{f}"),
                        "a value wherever index_topk is set (the DSA indexer's shape; \
                         DeepSeek-V3.2 publishes 64 heads of 128, GLM-5 32 of 128)"
                            .into(),
                    ));
                }
            }
        }
        // Zero-sized dimensions make every attention time zero or a division by zero.
        for (v, f) in [
            (c.head_dim, "head_dim"),
            (c.sliding_window, "sliding_window"),
            (c.kv_lora_rank, "kv_lora_rank"),
            (c.index_topk, "index_topk"),
            (c.index_n_heads, "index_n_heads"),
            (c.index_head_dim, "index_head_dim"),
        ] {
            if let Some(v) = v {
                pos(v, f)?;
            }
        }
        let any_sliding = c
            .layer_types
            .as_ref()
            .is_some_and(|t| t.iter().any(|t| t == "sliding_attention"));
        if any_sliding && c.sliding_window.is_none() {
            return Err((
                "config.sliding_window".into(),
                "the window length of the layers layer_types marks \"sliding_attention\"".into(),
            ));
        }
        if let Some(h) = &self.eagle_head {
            for (v, f) in [
                (h.num_layers, "num_layers"),
                (h.intermediate_size, "intermediate_size"),
            ] {
                if v == 0 {
                    return Err((
                        format!("eagle_head.{f}"),
                        "a positive integer (a draft head of no layers drafts nothing)".into(),
                    ));
                }
            }
            if h.num_layers > MAX_LAYERS {
                return Err((
                    "eagle_head.num_layers".into(),
                    format!("at most {MAX_LAYERS} layers"),
                ));
            }
            for (v, f) in [
                (Some(h.intermediate_size), "intermediate_size"),
                (h.num_attention_heads, "num_attention_heads"),
                (h.num_key_value_heads, "num_key_value_heads"),
                (h.head_dim, "head_dim"),
                (Some(h.draft_vocab_size).filter(|v| *v > 0), "vocab_size"),
            ] {
                let (lo, hi, _) = plausible_range(f).expect("a ranged field");
                if let Some(v) = v.filter(|v| !(lo..=hi).contains(v)) {
                    let expected = plausible_text(f).expect("a ranged field");
                    let name = if f == "vocab_size" {
                        "draft_vocab_size"
                    } else {
                        f
                    };
                    return Err((format!("eagle_head.{name}"), format!("{expected}, got {v}")));
                }
            }
            if h.draft_vocab_size > c.vocab_size {
                return Err((
                    "eagle_head.draft_vocab_size".into(),
                    format!(
                        "at most the target's vocabulary of {} tokens (a draft vocabulary is a subset of it), or 0 for the target's",
                        c.vocab_size
                    ),
                ));
            }
            if h.num_attention_heads.is_none()
                && (h.num_key_value_heads.is_some() || h.head_dim.is_some())
            {
                return Err((
                    "eagle_head.num_attention_heads".into(),
                    "the head's query heads, which num_key_value_heads and head_dim belong to"
                        .into(),
                ));
            }
            if let (Some(q), Some(kv)) = (h.num_attention_heads, h.num_key_value_heads) {
                if kv > q || q % kv != 0 {
                    return Err((
                        "eagle_head.num_key_value_heads".into(),
                        format!("a divisor of the head's {q} query heads"),
                    ));
                }
            }
        }
        if c.kv_lora_rank.is_some() {
            for (v, f) in [
                (c.qk_nope_head_dim, "qk_nope_head_dim"),
                (c.qk_rope_head_dim, "qk_rope_head_dim"),
                (c.v_head_dim, "v_head_dim"),
            ] {
                match v {
                    Some(v) => pos(v, f)?,
                    None => {
                        return Err((
                            format!("config.{f}"),
                            "an MLA head dimension (MLA models need it)".into(),
                        ))
                    }
                }
            }
        }
        Ok(())
    }
}
