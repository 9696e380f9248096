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
    #[serde(default, alias = "num_experts", alias = "num_local_experts")]
    pub n_routed_experts: Option<u32>,
    /// Experts each token is routed to (`experts_per_token` in gpt-oss).
    #[serde(default, alias = "experts_per_token")]
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
}

impl FromStr for WeightFormat {
    type Err = String;
    /// `bf16`, `fp16`, `fp8`, `fp8-block128` (128×128 FP32 block scales), `int8`, `int4-gN`
    /// (W4A16, BF16 scale per N weights), `nvfp4`, `mxfp4`.
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
            _ => {
                if let Some(g) = t.strip_prefix("int4-g") {
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
}

impl KvDtype {
    pub fn bytes(self) -> f64 {
        match self {
            KvDtype::Bf16 | KvDtype::Fp16 => 2.0,
            KvDtype::Fp8 => 1.0,
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
/// decoder layer plus the target's lm_head).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DraftHeadSpec {
    /// Decoder layers in the head (EAGLE-3: 1).
    pub num_layers: u32,
    /// MLP width of the head's decoder layer.
    pub intermediate_size: u32,
    /// Storage of the head's weights.
    pub format: WeightFormat,
    /// Head has its own lm_head over a reduced draft vocabulary of this size (0: shares the
    /// target's).
    #[serde(default)]
    pub draft_vocab_size: u32,
}

/// Most decoder layers a description may have (see [`ModelSpec::validate`]).
pub const MAX_LAYERS: u32 = 10_000;

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
    #[serde(default)]
    pub eagle_head: Option<DraftHeadSpec>,
    pub sources: BTreeMap<String, String>,
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
}

/// MoE shape, when the model has routed experts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moe {
    pub experts: u32,
    pub top_k: u32,
    pub shared: u32,
    pub expert_intermediate: u32,
}

impl ModelSpec {
    pub fn attention(&self) -> Attention {
        let c = &self.config;
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

    /// Leading dense layers (all layers when the model has no experts).
    pub fn dense_layers(&self) -> u32 {
        match self.moe() {
            None => self.config.num_hidden_layers,
            Some(_) => self
                .config
                .first_k_dense_replace
                .unwrap_or(0)
                .min(self.config.num_hidden_layers),
        }
    }

    pub fn moe_layers(&self) -> u32 {
        self.config.num_hidden_layers - self.dense_layers()
    }

    /// Whether layer `i` uses a sliding window, and its length.
    pub fn window_of_layer(&self, i: u32) -> Option<u32> {
        let w = self.config.sliding_window?;
        match &self.config.layer_types {
            Some(types) => types
                .get(i as usize)
                .filter(|t| t.as_str() == "sliding_attention")
                .map(|_| w),
            None => Some(w),
        }
    }

    /// KV-cache bytes one token occupies across all layers (on one replica of the cache).
    pub fn kv_bytes_per_token(&self) -> f64 {
        let b = self.quantization.kv_cache.bytes();
        let per_layer = match self.attention() {
            Attention::Mla {
                kv_lora_rank, rope, ..
            } => (kv_lora_rank + rope) as f64,
            Attention::Gqa { kv_heads, head_dim } => 2.0 * kv_heads as f64 * head_dim as f64,
        };
        let index = match (self.config.index_topk, self.config.index_head_dim) {
            (Some(_), Some(d)) => d as f64, // DSA indexer keys (counted at the KV dtype)
            _ => 0.0,
        };
        self.config.num_hidden_layers as f64 * (per_layer + index) * b
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
            if c.moe_intermediate_size.or(c.intermediate_size).unwrap_or(0) == 0 {
                return Err((
                    "config.moe_intermediate_size".into(),
                    "the expert MLP width (or intermediate_size)".into(),
                ));
            }
        }
        if self.dense_layers() > 0 && c.intermediate_size.unwrap_or(0) == 0 {
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
        if let Some(types) = &c.layer_types {
            if types.len() != c.num_hidden_layers as usize {
                return Err((
                    "config.layer_types".into(),
                    format!("one entry per layer ({})", c.num_hidden_layers),
                ));
            }
            if let Some(bad) = types
                .iter()
                .find(|t| t.as_str() != "sliding_attention" && t.as_str() != "full_attention")
            {
                return Err((
                    "config.layer_types".into(),
                    format!("\"sliding_attention\" or \"full_attention\", got \"{bad}\""),
                ));
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
