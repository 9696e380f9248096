//! Reading a Hugging Face `config.json`: the architecture, the fields rooftop's
//! [`ModelConfig`] names, and the layout of the decoder's Linear modules (which the
//! quantization rules are matched against).
//!
//! Why it is apart: `config.json` is read field by field with the file's own names, and every
//! key read is remembered ([`Obj`]) so that a field neither mapped nor in [`IRRELEVANT`] is
//! reported instead of silently dropped; errors name the file, the line and the field
//! ([`Ctx`]). The families differ in which keys carry the experts and which layers are dense,
//! and the [`Keys`] it returns let the TOML keep the file's names. Touches no files.

use super::quant::Group;
use crate::error::{Error, Result};
use crate::spec::model::{ModelConfig, LAYER_TYPES};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// Architectures (`architectures[0]`) the import understands. Any name containing both
/// "Glm" and "Moe" is read as the GLM MoE family as well.
pub const SUPPORTED: &[&str] = &[
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "DeepseekV4ForCausalLM",
    "KimiK25ForConditionalGeneration",
    "KimiVLForConditionalGeneration",
    "Glm4MoeForCausalLM",
    "GlmMoeDsaForCausalLM",
    "Qwen3MoeForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen2ForCausalLM",
    "MiMoForCausalLM",
    "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration",
    "Qwen3NextForCausalLM",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "Llama4ForConditionalGeneration",
    "Llama4ForCausalLM",
    "GptOssForCausalLM",
    "MiniMaxM2ForCausalLM",
    "Gemma4ForConditionalGeneration",
    "Gemma4ForCausalLM",
    "NemotronHForCausalLM",
    "Step3p5ForCausalLM",
    "Step3p7FlashForCausalLM",
    "DeciLMForCausalLM",
];

/// Architectures known by name whose config rooftop cannot yet cost, with the reason: the
/// refusal says what is missing instead of only listing the supported classes.
const UNMODELLED: &[(&str, &str)] = &[
    (
        "MiMoV2FlashForCausalLM",
        "MiMo-V2-Flash's layers differ by attention kind (hybrid_layer_pattern: sliding-window layers with swa_num_key_value_heads / swa_head_dim / swa_v_head_dim, global layers with num_key_value_heads / head_dim / v_head_dim) and its value heads are narrower than its query/key heads (v_head_dim 128 vs head_dim 192); rooftop's GQA has one head width for Q, K and V and per-layer K/V heads only for global layers, so the projections and the KV cache would be miscounted",
    ),
    (
        "MiMoV2ForCausalLM",
        "MiMo-V2's layers differ by attention kind (hybrid_layer_pattern with swa_* head shapes) and its value heads are narrower than its query/key heads (v_head_dim < head_dim); rooftop's GQA has one head width for Q, K and V",
    ),
    (
        "MiniMaxM3ForCausalLM",
        "MiniMax-M3's attention (MSA, a sparse attention with its own indexer) has no description in rooftop and no public config.json was found to build one from",
    ),
    (
        "KimiK3ForConditionalGeneration",
        "Kimi-K3's layer structure (attention residuals) has no description in rooftop and no public config.json was found to build one from",
    ),
    (
        "NemotronHPuzzleForCausalLM",
        "the Puzzle exports of Nemotron-H give each MoE layer its own moe_intermediate_size and num_experts_per_tok (block_configs); rooftop's MoE has one expert width and top-k for every layer",
    ),
];

/// `config.json` fields that do not change the shapes or bytes of a decode step: numerics
/// (norm epsilons, activation, dtype of the training run), positional encoding (RoPE),
/// routing decisions (rooftop assumes balanced routing), token ids, training-only settings
/// and generation defaults. Anything else unmapped is reported.
pub const IRRELEVANT: &[&str] = &[
    // bookkeeping
    "_name_or_path",
    "_commit_hash",
    "_attn_implementation",
    "auto_map",
    "model_type",
    "transformers_version",
    "torch_dtype",
    "dtype",
    "use_cache",
    "tokenizer_class",
    // token ids
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "sep_token_id",
    "decoder_start_token_id",
    "ignore_index",
    "media_placeholder_token_id",
    "video_placeholder",
    "use_unified_vision_chunk",
    // numerics and training
    "initializer_range",
    "rms_norm_eps",
    "layer_norm_eps",
    "hidden_act",
    "attention_dropout",
    "attention_bias",
    "mlp_bias",
    "pretraining_tp",
    "use_qk_norm",
    "swiglu_limit",
    "output_router_logits",
    "router_aux_loss_coef",
    "router_jitter_noise",
    "aux_loss_alpha",
    "seq_aux",
    "ep_size",
    // positional encoding (max_position_embeddings is read: the context window)
    "initial_context_length",
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "rope_interleave",
    "indexer_rope_interleave",
    "partial_rotary_factor",
    // routing function (balanced routing assumed; cost does not depend on which experts)
    "n_group",
    "topk_group",
    "topk_method",
    "scoring_func",
    "routed_scaling_factor",
    "norm_topk_prob",
    // generation defaults and PretrainedConfig boilerplate of older dumps
    "return_dict",
    "output_hidden_states",
    "output_attentions",
    "torchscript",
    "use_bfloat16",
    "tf_legacy_loss",
    "pruned_heads",
    "chunk_size_feed_forward",
    "is_encoder_decoder",
    "is_decoder",
    "cross_attention_hidden_size",
    "add_cross_attention",
    "tie_encoder_decoder",
    "max_length",
    "min_length",
    "do_sample",
    "early_stopping",
    "num_beams",
    "num_beam_groups",
    "diversity_penalty",
    "temperature",
    "top_k",
    "top_p",
    "typical_p",
    "repetition_penalty",
    "length_penalty",
    "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size",
    "bad_words_ids",
    "num_return_sequences",
    "output_scores",
    "return_dict_in_generate",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "remove_invalid_values",
    "exponential_decay_length_penalty",
    "suppress_tokens",
    "begin_suppress_tokens",
    "finetuning_task",
    "id2label",
    "label2id",
    "prefix",
    "task_specific_params",
    "problem_type",
    // multimodal token ids and wrappers' bookkeeping
    "image_token_id",
    "video_token_id",
    "audio_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
    "boa_token_id",
    "boi_token_id",
    "eoa_token_id",
    "eoi_token_id",
    "eoa_token_index",
    "vision_soft_tokens_per_image",
    "audio_config",
    "use_bidirectional_attention",
    "use_mrope",
    // numerics, norms and positional details of the newer families
    "rotary_dim",
    "qk_norm_type",
    "use_routing_bias",
    "use_moe_router_bias",
    "moe_router_scaling_factor",
    "router_jitter_noise",
    "final_logit_softcapping",
    "hidden_activation",
    "compress_rope_theta",
    "no_rope_layer_interval",
    "attn_temperature_tuning",
    "floor_scale",
    "attn_scale",
    "hidden_dropout",
    "layer_norm_epsilon",
    "norm_eps",
    "rescale_prenorm_residual",
    "residual_in_fp32",
    "time_step_floor",
    "time_step_max",
    "time_step_min",
    "time_step_limit",
    "use_bias",
    "use_conv_bias",
    "use_mamba_kernels",
    "mamba_hidden_act",
    "mamba_proj_bias",
    "mamba_chunk_size",
    "chunk_size",
    "expand",
    "num_logits_to_keep",
    "indexer_rope_interleave",
    "index_topk_pattern",
    "index_skip_topk_offset",
    "index_share_for_mtp_iteration",
    "index_topk_freq",
    "mtp_transformer_layers",
    "mtp_use_dedicated_embeddings",
    "full_attention_interval",
    "num_hash_layers",
    "moe_layers",
    // Nemotron-3: whether the shared expert's GEMMs overlap the experts' all-to-all (a
    // schedule, not a shape)
    "moe_shared_expert_overlap",
];

/// Architecture families: which field names carry the experts, and how layers are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    /// DeepSeek-V2/V3/V3.2 and the Kimi models built on them (MLA, shared experts, leading
    /// dense).
    DeepSeek,
    /// DeepSeek-V4: one shared K/V head, compressed KV per layer, low-rank grouped output.
    DeepSeekV4,
    /// GLM-4.5 (GQA) and GLM-5 (MLA + DSA): DeepSeek field names.
    GlmMoe,
    Qwen3Moe,
    /// Qwen3 / Qwen2 / MiMo / Qwen3-VL dense.
    Qwen3,
    /// Qwen3-Next and Qwen3.5/3.6: Gated DeltaNet and gated full attention, dense or MoE
    /// with a shared expert.
    Qwen35,
    /// Llama and Mistral: dense GQA.
    Llama,
    /// Llama-4: chunked and global attention, MoE with a shared expert at a stride.
    Llama4,
    Mixtral,
    GptOss,
    /// MiniMax-M2: GQA, every layer MoE (`num_local_experts`, `block_sparse_moe`).
    MiniMax,
    /// Gemma-4: sliding / global attention, a dense MLP beside the experts in every layer.
    Gemma4,
    /// Nemotron-H: Mamba-2, attention, MLP and MoE layers from `hybrid_override_pattern`.
    NemotronH,
    /// StepFun Step-3.5/3.7 Flash: sliding / full attention, leading dense, shared expert.
    Step,
    /// DeciLM (Nemotron-Super): per-layer FFN width and skipped attention.
    DeciLm,
}

impl Family {
    fn of(arch: &str) -> Option<Family> {
        Some(match arch {
            "DeepseekV2ForCausalLM"
            | "DeepseekV3ForCausalLM"
            | "DeepseekV32ForCausalLM"
            | "KimiK25ForConditionalGeneration"
            | "KimiVLForConditionalGeneration" => Family::DeepSeek,
            "DeepseekV4ForCausalLM" => Family::DeepSeekV4,
            "Qwen3MoeForCausalLM" | "Qwen3VLMoeForConditionalGeneration" => Family::Qwen3Moe,
            "Qwen3ForCausalLM"
            | "Qwen2ForCausalLM"
            | "MiMoForCausalLM"
            | "Qwen3VLForConditionalGeneration" => Family::Qwen3,
            "Qwen3NextForCausalLM"
            | "Qwen3_5ForConditionalGeneration"
            | "Qwen3_5MoeForConditionalGeneration" => Family::Qwen35,
            "LlamaForCausalLM" | "MistralForCausalLM" => Family::Llama,
            "Llama4ForConditionalGeneration" | "Llama4ForCausalLM" => Family::Llama4,
            "MixtralForCausalLM" => Family::Mixtral,
            "GptOssForCausalLM" => Family::GptOss,
            "MiniMaxM2ForCausalLM" => Family::MiniMax,
            "Gemma4ForConditionalGeneration" | "Gemma4ForCausalLM" => Family::Gemma4,
            "NemotronHForCausalLM" => Family::NemotronH,
            "Step3p5ForCausalLM" | "Step3p7FlashForCausalLM" => Family::Step,
            "DeciLMForCausalLM" => Family::DeciLm,
            a if a.contains("Glm") && a.contains("Moe") => Family::GlmMoe,
            _ => return None,
        })
    }

    /// The `config.json` name of the routed-expert count (None: a dense family).
    fn experts_key(self) -> Option<&'static str> {
        match self {
            Family::DeepSeek | Family::GlmMoe | Family::DeepSeekV4 | Family::NemotronH => {
                Some("n_routed_experts")
            }
            Family::Qwen3Moe | Family::Qwen35 | Family::Gemma4 | Family::Step => {
                Some("num_experts")
            }
            Family::Mixtral | Family::GptOss | Family::MiniMax | Family::Llama4 => {
                Some("num_local_experts")
            }
            Family::Qwen3 | Family::Llama | Family::DeciLm => None,
        }
    }

    /// Families with dense and MoE members under one class: the expert count may be absent.
    /// Nemotron-H: the dense members (Nemotron-H 8B/56B, Nano-9B-v2, whose pattern has no
    /// `E`) ship no `n_routed_experts`; a pattern with `E` layers then needs it (checked in
    /// [`read_config`]).
    fn experts_optional(self) -> bool {
        matches!(self, Family::Qwen35 | Family::Gemma4 | Family::NemotronH)
    }

    /// Families whose expert width is `moe_intermediate_size` (else `intermediate_size`).
    fn has_moe_intermediate(self) -> bool {
        matches!(
            self,
            Family::DeepSeek
                | Family::GlmMoe
                | Family::Qwen3Moe
                | Family::Qwen35
                | Family::Gemma4
                | Family::NemotronH
                | Family::Step
                | Family::DeepSeekV4
        )
    }

    /// DeepSeek-style leading dense layers and shared experts.
    fn deepseek_style(self) -> bool {
        matches!(
            self,
            Family::DeepSeek | Family::GlmMoe | Family::DeepSeekV4 | Family::Step
        )
    }

    /// The decoder's module prefix in checkpoints: `model`, `backbone` (Nemotron-H), or the
    /// vision-language wrappers' `model.language_model` (transformers >= 4.52: Qwen3-VL,
    /// Qwen3.5, Gemma-4, Llama-4) / `language_model.model` (Kimi).
    fn module_prefix(self, nested: bool) -> (&'static str, &'static str) {
        match (self, nested) {
            (Family::NemotronH, _) => ("backbone", "lm_head"),
            (
                Family::Qwen3 | Family::Qwen3Moe | Family::Qwen35 | Family::Gemma4 | Family::Llama4,
                true,
            ) => ("model.language_model", "lm_head"),
            (_, true) => ("language_model.model", "language_model.lm_head"),
            (_, false) => ("model", "lm_head"),
        }
    }
}

/// Where the file is and what is being read, for error messages.
pub(super) struct Ctx<'a> {
    pub label: &'a str,
    pub text: &'a str,
    pub arch: String,
}

impl Ctx<'_> {
    /// Line (1-based) of the first `"key"` in the file, after the `"text_config"` line when
    /// the field lives there.
    fn line_of(&self, path: &str) -> Option<usize> {
        let (section, key) = match path.rsplit_once('.') {
            Some((s, k)) => (Some(s.rsplit('.').next().unwrap_or(s)), k),
            None => (None, path),
        };
        let mut start = 0;
        if let Some(s) = section {
            let pat = format!("\"{s}\"");
            start = self
                .text
                .lines()
                .position(|l| l.contains(&pat))
                .unwrap_or(0);
        }
        let pat = format!("\"{key}\"");
        self.text
            .lines()
            .enumerate()
            .skip(start)
            .find(|(_, l)| l.contains(&pat))
            .map(|(i, _)| i + 1)
    }

    pub(super) fn invalid(&self, field: &str, expected: impl Into<String>) -> Error {
        Error::Invalid {
            file: self.label.to_string(),
            line: self.line_of(field),
            field: field.to_string(),
            expected: expected.into(),
        }
    }

    pub(super) fn missing(&self, field: &str, what: &str) -> Error {
        Error::Invalid {
            file: self.label.to_string(),
            line: None,
            field: field.to_string(),
            expected: format!("{what} (required for {}; the field is missing)", self.arch),
        }
    }
}

/// One JSON object being read, remembering which keys were consumed.
pub(super) struct Obj<'a> {
    map: &'a Map<String, Value>,
    /// Dotted path of the object in the file: "" or "text_config.".
    pub path: &'static str,
    used: BTreeSet<String>,
}

impl<'a> Obj<'a> {
    pub(super) fn new(map: &'a Map<String, Value>, path: &'static str) -> Self {
        Obj {
            map,
            path,
            used: BTreeSet::new(),
        }
    }

    pub(super) fn field(&self, key: &str) -> String {
        format!("{}{key}", self.path)
    }

    /// The value, marking the key read; JSON null reads as absent.
    pub(super) fn get(&mut self, key: &str) -> Option<&'a Value> {
        self.used.insert(key.to_string());
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(super) fn u32(&mut self, cx: &Ctx, key: &str) -> Result<Option<u32>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => as_u32(v).map(Some).ok_or_else(|| {
                // A whole number past 32 bits (1e15) is no typo for a negative one: say what
                // range the field has, as the model's own check would.
                let whole = v.as_f64().is_some_and(|f| f.fract() == 0.0 && f >= 0.0);
                let expected = match crate::spec::model::plausible_text(key) {
                    Some(range) if whole => range,
                    _ if whole => format!("a whole number up to {}", u32::MAX),
                    _ => "a non-negative integer".into(),
                };
                cx.invalid(&self.field(key), format!("{expected}, got {v}"))
            }),
        }
    }

    pub(super) fn req_u32(&mut self, cx: &Ctx, key: &str, what: &str) -> Result<u32> {
        self.u32(cx, key)?
            .ok_or_else(|| cx.missing(&self.field(key), what))
    }

    pub(super) fn bool(&mut self, cx: &Ctx, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| cx.invalid(&self.field(key), format!("true or false, got {v}"))),
        }
    }

    pub(super) fn strings(&mut self, cx: &Ctx, key: &str) -> Result<Option<Vec<String>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| cx.invalid(&self.field(key), "a list of strings")),
            Some(v) => Err(cx.invalid(&self.field(key), format!("a list of strings, got {v}"))),
        }
    }

    pub(super) fn u32s(&mut self, cx: &Ctx, key: &str) -> Result<Option<Vec<u32>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(as_u32)
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| cx.invalid(&self.field(key), "a list of non-negative integers")),
            Some(v) => Err(cx.invalid(
                &self.field(key),
                format!("a list of non-negative integers, got {v}"),
            )),
        }
    }

    /// Keys neither read nor known to be irrelevant, as warnings.
    fn leftovers(&self, warnings: &mut Vec<String>) {
        for (k, v) in self.map {
            if self.used.contains(k) || IRRELEVANT.contains(&k.as_str()) {
                continue;
            }
            warnings.push(format!(
                "{}{k} = {}: not used by rooftop's model and not known to be irrelevant; check that it does not change the architecture",
                self.path,
                preview(v)
            ));
        }
    }
}

pub(super) fn as_u32(v: &Value) -> Option<u32> {
    match v.as_u64() {
        Some(u) => u32::try_from(u).ok(),
        None => v
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u32::MAX as f64)
            .map(|f| f as u32),
    }
}

/// A JSON value shortened for a warning.
pub(super) fn preview(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

/// A JSON file's text as a value; `label` names the file in the error. Reads JSON as
/// Hugging Face writes it: Python's `json` emits `Infinity`, `-Infinity` and `NaN` for
/// non-finite floats (and reads them back), so they are accepted here as the largest finite
/// doubles and null.
pub(super) fn parse_json(text: &str, label: &str) -> Result<Value> {
    let text = non_finite_literals(text);
    serde_json::from_str(&text).map_err(|e| Error::Parse {
        file: label.to_string(),
        message: format!("not valid JSON: {e}"),
    })
}

/// `Infinity`, `-Infinity` and `NaN` outside strings, rewritten as JSON numbers / null.
fn non_finite_literals(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("Infinity") && !text.contains("NaN") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let (mut in_str, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let (lit, with) = if rest.starts_with("-Infinity") {
            ("-Infinity", "-1.7976931348623157e308")
        } else if rest.starts_with("Infinity") {
            ("Infinity", "1.7976931348623157e308")
        } else if rest.starts_with("NaN") {
            ("NaN", "null")
        } else {
            ("", "")
        };
        if !lit.is_empty() {
            out.push_str(with);
            rest = &rest[lit.len()..];
            continue;
        }
        if c == '"' {
            in_str = true;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

/// `architectures[0]` and its family; a second class listed is a warning.
pub(super) fn read_architecture(
    cx: &Ctx,
    top: &mut Obj,
    warnings: &mut Vec<String>,
) -> Result<(String, Family)> {
    let archs = top.strings(cx, "architectures")?.unwrap_or_default();
    let arch = archs.first().cloned().ok_or_else(|| {
        cx.invalid(
            "architectures",
            format!(
                "a list naming the model class, one of {}",
                SUPPORTED.join(", ")
            ),
        )
    })?;
    if archs.len() > 1 {
        warnings.push(format!(
            "architectures lists {} classes; read as the first, {arch}",
            archs.len()
        ));
    }
    if let Some((_, why)) = UNMODELLED.iter().find(|(a, _)| *a == arch) {
        return Err(cx.invalid(
            "architectures",
            format!("an architecture rooftop can cost; \"{arch}\" is not yet: {why}"),
        ));
    }
    let family = Family::of(&arch).ok_or_else(|| {
        cx.invalid(
            "architectures",
            format!(
                "a supported architecture ({}, or any name containing both \"Glm\" and \"Moe\"); got \"{arch}\"",
                SUPPORTED.join(", ")
            ),
        )
    })?;
    Ok((arch, family))
}

/// The activation names transformers' `ACT2FN` knows (src/transformers/activations.py,
/// `ACT2CLS`). An HF model class builds its MLP from this table, so a name outside it is a
/// config no loader runs: refused, where reading it as some MLP would count its matrices by
/// guess.
const HF_ACTIVATIONS: &[&str] = &[
    "gelu",
    "gelu_10",
    "gelu_fast",
    "gelu_new",
    "gelu_python",
    "gelu_pytorch_tanh",
    "gelu_python_tanh",
    "gelu_accurate",
    "hardswish",
    "laplace",
    "leaky_relu",
    "linear",
    "mish",
    "quick_gelu",
    "relu",
    "relu2",
    "relu6",
    "sigmoid",
    "silu",
    "sqrtsoftplus",
    "swish",
    "tanh",
    "prelu",
    "xielu",
];

/// Every activation field the config gives names one of [`HF_ACTIVATIONS`].
fn check_activations(cx: &Ctx, t: &Obj) -> Result<()> {
    for key in [
        "hidden_act",
        "hidden_activation",
        "mlp_hidden_act",
        "mamba_hidden_act",
    ] {
        match t.map.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(a)) if HF_ACTIVATIONS.contains(&a.as_str()) => {}
            Some(v) => {
                return Err(cx.invalid(
                    &t.field(key),
                    format!(
                        "an activation transformers knows ({}), got {}",
                        HF_ACTIVATIONS.join(", "),
                        preview(v)
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// The language model's fields: `text_config` in a vision-language wrapper (which must have
/// one), None when they are at the top level. A vision encoder is a warning.
pub(super) fn language_model<'a>(
    cx: &Ctx,
    top: &mut Obj<'a>,
    warnings: &mut Vec<String>,
) -> Result<Option<&'a Map<String, Value>>> {
    let nested = match top.get("text_config") {
        Some(Value::Object(m)) => Some(m),
        Some(v) => {
            return Err(cx.invalid(
                "text_config",
                format!(
                    "an object holding the language model's config, got {}",
                    preview(v)
                ),
            ))
        }
        None => None,
    };
    if nested.is_none() && cx.arch.ends_with("ForConditionalGeneration") {
        return Err(cx.missing(
            "text_config",
            "the language model's config (a vision-language wrapper keeps it there)",
        ));
    }
    let _ = warnings;
    Ok(nested)
}

/// Warnings for the keys of `t` (the language model) and `top` (the file) that were neither
/// read nor known to be irrelevant.
pub(super) fn report_leftovers(t: &mut Obj, top: &Obj, warnings: &mut Vec<String>) {
    if t.path.is_empty() {
        // One object read through two handles.
        t.used.extend(top.used.iter().cloned());
        t.leftovers(warnings);
    } else {
        t.leftovers(warnings);
        top.leftovers(warnings);
    }
}

/// The `config.json` key names the TOML writes for the aliased fields.
pub(super) struct Keys {
    pub experts: &'static str,
    pub top_k: &'static str,
    /// A note for `first_k_dense_replace` when it was derived, not read.
    pub first_k_note: Option<String>,
}

/// What one layer runs, as the quantization resolver names its modules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LayerMixer {
    Attention,
    Linear,
    Mamba,
    None,
}

/// A layer's feed-forward, for module names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LayerFfn {
    Dense,
    Moe,
    None,
}

/// What the quantization resolver needs to name modules.
pub(super) struct Layout {
    family: Family,
    /// Module prefix of the decoder: `model`, `backbone`, `model.language_model` or
    /// `language_model.model`.
    prefix: String,
    lm_head: String,
    /// Per layer, in order: token mixer and feed-forward.
    mixers: Vec<LayerMixer>,
    ffns: Vec<LayerFfn>,
    experts: u32,
    shared: bool,
    mla: bool,
    q_lora: bool,
    /// LatentMoE: each MoE layer has `fc1_latent_proj` and `fc2_latent_proj`.
    latent: bool,
}

/// The architecture fields, the `config.json` names the TOML should keep, and the module
/// layout the quantization rules are matched against.
pub(super) fn read_config(
    cx: &Ctx,
    family: Family,
    t: &mut Obj,
    top: &mut Obj,
    warnings: &mut Vec<String>,
) -> Result<(ModelConfig, Keys, Layout)> {
    let layers = match t.u32(cx, "num_hidden_layers")? {
        Some(n) => n,
        // Nemotron-H (transformers 5 and the Puzzle exports) may leave the count out: the
        // config class takes it from the per-layer pattern.
        None if family == Family::NemotronH => {
            let (blocks, field) = super::layers::nemotron_blocks(cx, t)?;
            warnings.push(format!(
                "{}num_hidden_layers is absent: {} layers, the length of {field}",
                t.path,
                blocks.len()
            ));
            u32::try_from(blocks.len()).unwrap_or(u32::MAX)
        }
        None => {
            return Err(cx.missing(
                &t.field("num_hidden_layers"),
                "the number of decoder layers",
            ))
        }
    };
    // Checked before the per-layer tables below are built from it (the quantization of a
    // group is read from its layers' modules, so a model needs at least one).
    if !(1..=crate::spec::model::MAX_LAYERS).contains(&layers) {
        return Err(cx.invalid(
            &t.field("num_hidden_layers"),
            format!("between 1 and {} layers", crate::spec::model::MAX_LAYERS),
        ));
    }
    check_activations(cx, t)?;
    let hidden = t.req_u32(cx, "hidden_size", "the model width")?;
    let heads = t.req_u32(cx, "num_attention_heads", "the number of query heads")?;
    let vocab = t.req_u32(cx, "vocab_size", "the vocabulary size")?;
    let kv_heads = t.u32(cx, "num_key_value_heads")?;
    let head_dim = t.u32(cx, "head_dim")?;
    let mla = read_mla(cx, family, t, warnings)?;
    let mut keys = Keys {
        experts: "n_routed_experts",
        top_k: "num_experts_per_tok",
        first_k_note: None,
    };
    let mlp = read_mlp(cx, family, t, &mut keys, warnings)?;
    let kinds = super::layers::read_layer_kinds(cx, family, t, layers, warnings)?;
    let sparse_layers = kinds
        .ffn_pattern
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == "sparse"));
    if sparse_layers && mlp.experts.is_none() {
        return Err(cx.missing(
            &t.field(keys.experts),
            "the number of routed experts (the layer pattern has MoE layers)",
        ));
    }
    let (moe, first_k, mlp_types) =
        moe_layers(cx, family, t, layers, &mlp, &kinds, &mut keys, warnings)?;
    let tie = read_tie(cx, t, top, warnings)?;
    let nextn = super::layers::read_mtp(cx, family, t, warnings)?;
    let (sliding, layer_types) = read_windows(cx, family, t, layers, kinds.layer_types, warnings)?;
    // DeepSeek sparse attention.
    let index_topk = t.u32(cx, "index_topk")?;
    let index_n_heads = t.u32(cx, "index_n_heads")?;
    let index_head_dim = t.u32(cx, "index_head_dim")?;
    let window = t.u32(cx, "max_position_embeddings")?;
    if window.is_none() {
        warnings.push(format!(
            "{}max_position_embeddings is absent: no context window is known, so no --context is \
             refused as longer than the model takes; add it to the TOML if the model card gives one",
            t.path
        ));
    }
    if kv_heads.is_none() && mla.kv_lora.is_none() && heads > 0 {
        warnings.push(format!(
            "{}num_key_value_heads is absent: read as {heads}, one K/V head per query head \
             (multi-head attention), as transformers' configs default it",
            t.path
        ));
    }
    warn_dtype(t, warnings);

    let experts = mlp.experts;
    let mut config = ModelConfig {
        num_hidden_layers: layers,
        hidden_size: hidden,
        num_attention_heads: heads,
        num_key_value_heads: kv_heads,
        head_dim,
        q_lora_rank: mla.q_lora,
        kv_lora_rank: mla.kv_lora,
        qk_nope_head_dim: mla.nope,
        qk_rope_head_dim: mla.rope,
        v_head_dim: mla.v_dim,
        intermediate_size: mlp.intermediate,
        moe_intermediate_size: mlp.moe_intermediate.filter(|_| experts.is_some()),
        n_routed_experts: experts,
        num_experts_per_tok: mlp.top_k.filter(|_| experts.is_some()),
        n_shared_experts: mlp.shared,
        shared_expert_intermediate_size: mlp.shared_width.filter(|_| experts.is_some()),
        moe_latent_size: mlp.latent,
        first_k_dense_replace: first_k,
        vocab_size: vocab,
        tie_word_embeddings: tie,
        num_nextn_predict_layers: nextn,
        sliding_window: sliding,
        layer_types,
        mlp_layer_types: mlp_types,
        layer_intermediate_sizes: kinds.layer_intermediate_sizes,
        layer_num_key_value_heads: kinds.layer_kv_heads,
        attention_chunk_size: kinds.chunk,
        index_topk,
        index_n_heads,
        index_head_dim,
        max_position_embeddings: window,
        ..ModelConfig::default()
    };
    super::layers::read_mixer_dims(cx, family, t, &mut config, warnings)?;
    if experts.is_none() {
        // Dense families: these keys mean nothing here; leave them to the leftovers check.
        for k in ["moe_intermediate_size", "num_experts_per_tok"] {
            if t.map.get(k).is_some_and(|v| !v.is_null()) {
                t.used.remove(k);
            }
        }
    }
    let nested = t.path == "text_config.";
    let (prefix, lm_head) = family.module_prefix(nested);
    let mixers = (0..layers)
        .map(|i| {
            match config
                .layer_types
                .as_ref()
                .and_then(|v| v.get(i as usize))
                .map(String::as_str)
            {
                Some("linear_attention") => LayerMixer::Linear,
                Some("mamba") => LayerMixer::Mamba,
                Some("none") => LayerMixer::None,
                _ => LayerMixer::Attention,
            }
        })
        .collect();
    let ffns = (0..layers as usize)
        .map(|i| match (&config.mlp_layer_types, moe[i]) {
            (Some(t), _) if t[i] == "none" => LayerFfn::None,
            (_, true) => LayerFfn::Moe,
            _ => LayerFfn::Dense,
        })
        .collect();
    let layout = Layout {
        family,
        prefix: prefix.into(),
        lm_head: lm_head.into(),
        mixers,
        ffns,
        experts: experts.unwrap_or(0),
        shared: mlp.shared.unwrap_or(0) > 0 || mlp.shared_width.unwrap_or(0) > 0,
        mla: mla.kv_lora.is_some(),
        q_lora: mla.q_lora.is_some(),
        latent: mlp.latent.is_some(),
    };
    Ok((config, keys, layout))
}

/// Multi-head latent attention: present when `kv_lora_rank` is (DeepSeek requires it).
struct Mla {
    q_lora: Option<u32>,
    kv_lora: Option<u32>,
    nope: Option<u32>,
    rope: Option<u32>,
    v_dim: Option<u32>,
}

fn read_mla(cx: &Ctx, family: Family, t: &mut Obj, warnings: &mut Vec<String>) -> Result<Mla> {
    let q_lora = t.u32(cx, "q_lora_rank")?;
    let kv_lora = t.u32(cx, "kv_lora_rank")?;
    let (mut nope, mut rope, mut v_dim) = (None, None, None);
    if family == Family::DeepSeek && kv_lora.is_none() {
        return Err(cx.missing(&t.field("kv_lora_rank"), "the MLA latent rank"));
    }
    if family == Family::DeepSeekV4 {
        // Read as its own attention form (spec::Attention::Compressed).
        t.get("qk_rope_head_dim");
        return Ok(Mla {
            q_lora,
            kv_lora: None,
            nope,
            rope,
            v_dim,
        });
    }
    if kv_lora.is_some() {
        nope = Some(t.req_u32(cx, "qk_nope_head_dim", "the MLA non-rotary head dimension")?);
        rope = Some(t.req_u32(cx, "qk_rope_head_dim", "the MLA rotary head dimension")?);
        v_dim = Some(t.req_u32(cx, "v_head_dim", "the MLA value head dimension")?);
        if let (Some(qk), Some(n), Some(r)) = (t.u32(cx, "qk_head_dim")?, nope, rope) {
            let parts = u64::from(n) + u64::from(r);
            if u64::from(qk) != parts {
                warnings.push(format!(
                    "{}qk_head_dim = {qk} is not qk_nope_head_dim + qk_rope_head_dim = {parts}; used the two parts",
                    t.path,
                ));
            }
        }
    }
    Ok(Mla {
        q_lora,
        kv_lora,
        nope,
        rope,
        v_dim,
    })
}

/// MLP widths and routed experts, read under the family's key names.
struct Mlp {
    /// Dense MLP width.
    intermediate: Option<u32>,
    moe_intermediate: Option<u32>,
    /// Routed experts; None for a dense model (absent or 0).
    experts: Option<u32>,
    top_k: Option<u32>,
    shared: Option<u32>,
    /// Width of the shared expert path where the family states it as a width.
    shared_width: Option<u32>,
    /// LatentMoE width (Nemotron-3 Super `moe_latent_size`).
    latent: Option<u32>,
}

fn read_mlp(
    cx: &Ctx,
    family: Family,
    t: &mut Obj,
    keys: &mut Keys,
    warnings: &mut Vec<String>,
) -> Result<Mlp> {
    let mut intermediate = t.u32(cx, "intermediate_size")?;
    let mut moe_intermediate = t.u32(cx, "moe_intermediate_size")?;
    let enabled = match family {
        Family::Gemma4 => t.bool(cx, "enable_moe_block")?.unwrap_or(true),
        _ => true,
    };
    let experts = match family.experts_key() {
        Some(k) => {
            keys.experts = k;
            if family.experts_optional() {
                t.u32(cx, k)?
            } else {
                Some(t.req_u32(cx, k, "the number of routed experts")?)
            }
        }
        None => None,
    }
    .filter(|e| *e > 0 && enabled);
    if family == Family::GlmMoe {
        // GLM-5.2 repeats the count as num_experts.
        if let (Some(a), Some(b)) = (experts, t.u32(cx, "num_experts")?) {
            if a != b {
                warnings.push(format!(
                    "{0}n_routed_experts = {a} and {0}num_experts = {b} disagree; used n_routed_experts",
                    t.path
                ));
            }
        }
    }
    let mut top_k = t.u32(cx, "num_experts_per_tok")?;
    let alt_key = match family {
        Family::GptOss => Some("experts_per_token"),
        Family::Gemma4 => Some("top_k_experts"),
        _ => None,
    };
    if let Some(alt_key) = alt_key {
        let alt = t.u32(cx, alt_key)?;
        match (top_k, alt) {
            (Some(a), Some(b)) if a != b => warnings.push(format!(
                "{0}num_experts_per_tok = {a} and {0}{alt_key} = {b} disagree; used num_experts_per_tok",
                t.path
            )),
            (None, Some(b)) => {
                top_k = Some(b);
                keys.top_k = alt_key;
            }
            _ => {}
        }
    }
    let mut shared = if family.deepseek_style() || family == Family::NemotronH {
        t.u32(cx, "n_shared_experts")?
    } else {
        None
    };
    let mut shared_width = match family {
        Family::Qwen35 | Family::Qwen3Moe => t.u32(cx, "shared_expert_intermediate_size")?,
        Family::NemotronH => t.u32(cx, "moe_shared_expert_intermediate_size")?,
        Family::Step => t
            .u32(cx, "share_expert_dim")?
            .map(|d| d * shared.unwrap_or(1).max(1)),
        Family::MiniMax => t.u32(cx, "shared_intermediate_size")?,
        _ => None,
    }
    .filter(|w| *w > 0);
    match family {
        // Llama-4: experts and the shared expert are intermediate_size wide; dense layers
        // intermediate_size_mlp.
        Family::Llama4 => {
            moe_intermediate = intermediate;
            shared_width = intermediate;
            intermediate = t.u32(cx, "intermediate_size_mlp")?.or(intermediate);
        }
        // Gemma-4: a dense MLP of intermediate_size runs beside the experts in every layer:
        // an always-on shared path.
        Family::Gemma4 if experts.is_some() => {
            shared_width = intermediate;
        }
        _ => {}
    }
    if shared_width.is_some() {
        // The width says it all (Step's already counts n_shared_experts).
        shared = None;
    }
    if experts.is_some() && top_k.is_none() {
        return Err(cx.missing(
            &t.field("num_experts_per_tok"),
            "the experts each token is routed to",
        ));
    }
    if experts.is_some() && family.has_moe_intermediate() && moe_intermediate.is_none() {
        return Err(cx.missing(&t.field("moe_intermediate_size"), "the expert MLP width"));
    }
    if experts.is_none() && intermediate.is_none() && family != Family::DeciLm {
        return Err(cx.missing(&t.field("intermediate_size"), "the MLP width"));
    }
    if experts.is_some() && !family.has_moe_intermediate() && intermediate.is_none() {
        return Err(cx.missing(&t.field("intermediate_size"), "the expert MLP width"));
    }
    // LatentMoE: vLLM's NemotronHMoE uses it whenever the key is present (not null).
    let latent = match family {
        Family::NemotronH => t.u32(cx, "moe_latent_size")?.filter(|_| experts.is_some()),
        _ => None,
    };
    Ok(Mlp {
        intermediate,
        moe_intermediate,
        experts,
        top_k,
        shared,
        shared_width,
        latent,
    })
}

/// Which layers are MoE (as the Hugging Face modeling code decides it). A leading dense
/// block is written as `first_k_dense_replace`; any other pattern as `mlp_layer_types`.
/// Returns the per-layer MoE flags, `first_k_dense_replace` and `mlp_layer_types`; a count
/// derived rather than read gets a note in `keys`.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn moe_layers(
    cx: &Ctx,
    family: Family,
    t: &mut Obj,
    layers: u32,
    mlp: &Mlp,
    kinds: &super::layers::LayerKinds,
    keys: &mut Keys,
    warnings: &mut Vec<String>,
) -> Result<(Vec<bool>, Option<u32>, Option<Vec<String>>)> {
    let experts = mlp.experts;
    let mut first_k = None;
    let given = t.strings(cx, "mlp_layer_types")?;
    let moe: Vec<bool> = match (family, experts) {
        (_, None) => vec![false; layers as usize],
        (_, Some(_)) if given.is_some() => {
            let g = given.as_ref().expect("checked");
            if g.len() != layers as usize {
                return Err(cx.invalid(
                    &t.field("mlp_layer_types"),
                    format!("one entry per layer ({layers}), got {}", g.len()),
                ));
            }
            t.u32(cx, "first_k_dense_replace")?;
            t.u32(cx, "moe_layer_freq")?;
            g.iter().map(|x| x == "sparse" || x == "moe").collect()
        }
        (_, Some(_)) if kinds.ffn_pattern.is_some() => kinds
            .ffn_pattern
            .as_ref()
            .expect("checked")
            .iter()
            .map(|x| x == "sparse")
            .collect(),
        (Family::DeepSeek | Family::GlmMoe | Family::Step, Some(_)) => {
            first_k = t.u32(cx, "first_k_dense_replace")?;
            // More leading dense layers than layers is a wrong count, not "all dense".
            if let Some(k) = first_k.filter(|&k| k > layers) {
                return Err(cx.invalid(
                    &t.field("first_k_dense_replace"),
                    format!("at most num_hidden_layers ({layers}), got {k}"),
                ));
            }
            let freq = t.u32(cx, "moe_layer_freq")?.unwrap_or(1).max(1);
            let k = first_k.unwrap_or(0);
            (0..layers).map(|i| i >= k && i % freq == 0).collect()
        }
        (Family::Qwen3Moe | Family::Qwen35, Some(_)) => {
            let only = t.u32s(cx, "mlp_only_layers")?.unwrap_or_default();
            let step = t.u32(cx, "decoder_sparse_step")?.unwrap_or(1).max(1);
            (0..layers)
                .map(|i| !only.contains(&i) && (i + 1) % step == 0)
                .collect()
        }
        (Family::Llama4, Some(_)) => {
            let step = t.u32(cx, "interleave_moe_layer_step")?.unwrap_or(1).max(1);
            match t.u32s(cx, "moe_layers")? {
                Some(l) => (0..layers).map(|i| l.contains(&i)).collect(),
                None => (0..layers).map(|i| (i + 1) % step == 0).collect(),
            }
        }
        (_, Some(_)) => vec![true; layers as usize],
    };
    let dense = moe.iter().filter(|m| !**m).count() as u32;
    let leading = moe.iter().take_while(|m| !**m).count() as u32;
    // Layers without a feed-forward at all (Nemotron-H mixer-only layers, "none").
    let none: Vec<bool> = match (&given, &kinds.ffn_pattern) {
        (Some(g), _) | (None, Some(g)) => g.iter().map(|x| x == "none").collect(),
        _ => vec![false; layers as usize],
    };
    let mut types = None;
    if kinds.ffn_pattern.is_some() || given.is_some() || none.iter().any(|n| *n) {
        types = Some(
            (0..layers as usize)
                .map(|i| {
                    if none[i] {
                        "none"
                    } else if moe[i] {
                        "sparse"
                    } else {
                        "dense"
                    }
                    .to_string()
                })
                .collect(),
        );
    } else if experts.is_some() && dense != first_k.unwrap_or(0) {
        if dense != leading {
            let which: Vec<String> = moe
                .iter()
                .enumerate()
                .filter(|(_, m)| !**m)
                .map(|(i, _)| i.to_string())
                .collect();
            warnings.push(format!(
                "layers {} have a dense MLP, not only a leading block; written as mlp_layer_types",
                which.join(", ")
            ));
            types = Some(
                moe.iter()
                    .map(|m| if *m { "sparse" } else { "dense" }.to_string())
                    .collect(),
            );
        } else {
            keys.first_k_note = Some(format!(
                "derived: {dense} dense layer(s) from {}",
                match family {
                    Family::Qwen3Moe | Family::Qwen35 => "mlp_only_layers / decoder_sparse_step",
                    Family::Llama4 => "interleave_moe_layer_step",
                    _ => "first_k_dense_replace / moe_layer_freq",
                }
            ));
            first_k = Some(dense);
        }
    }
    if types.is_some() {
        first_k = None;
    }
    let dense_somewhere = (0..layers as usize).any(|i| !moe[i] && !none[i]);
    if dense_somewhere && mlp.intermediate.is_none() && kinds.layer_intermediate_sizes.is_none() {
        return Err(cx.missing(&t.field("intermediate_size"), "the dense MLP width"));
    }
    Ok((moe, first_k, types))
}

/// `tie_word_embeddings`, in the language model's fields or at the top level; absent reads
/// as false, with a warning.
fn read_tie(cx: &Ctx, t: &mut Obj, top: &mut Obj, warnings: &mut Vec<String>) -> Result<bool> {
    Ok(match t.bool(cx, "tie_word_embeddings")? {
        Some(b) => {
            top.get("tie_word_embeddings");
            b
        }
        None => match top.bool(cx, "tie_word_embeddings")? {
            Some(b) => b,
            None => {
                warnings.push(format!(
                    "tie_word_embeddings is absent; assumed false (an lm_head separate from the embedding), the default of {}'s config class",
                    cx.arch
                ));
                false
            }
        },
    })
}

/// A training dtype other than 16-bit: rooftop counts unquantized weights as 16-bit.
fn warn_dtype(t: &Obj, warnings: &mut Vec<String>) {
    for key in ["torch_dtype", "dtype"] {
        if let Some(d) = t.map.get(key).and_then(Value::as_str) {
            if !matches!(d, "bfloat16" | "float16") {
                warnings.push(format!(
                    "{}{key} = \"{d}\": rooftop counts unquantized weights as 16-bit",
                    t.path
                ));
            }
        }
    }
}

/// `sliding_window` and the per-layer mixer list, normalised: no window when no layer uses
/// one. `derived` is a list built from a family's own fields (Llama-4 chunking, Nemotron-H's
/// pattern), used when the file has no `layer_types`.
fn read_windows(
    cx: &Ctx,
    family: Family,
    t: &mut Obj,
    layers: u32,
    derived: Option<Vec<String>>,
    warnings: &mut Vec<String>,
) -> Result<(Option<u32>, Option<Vec<String>>)> {
    let window = t.u32(cx, "sliding_window")?;
    let mut types = t.strings(cx, "layer_types")?.or(derived);
    if matches!(family, Family::Qwen3 | Family::Qwen3Moe) {
        // Qwen3 carries a window length that is off unless use_sliding_window is true; then
        // the layers from max_window_layers on use it.
        let on = t.bool(cx, "use_sliding_window")?.unwrap_or(false);
        let from = t.u32(cx, "max_window_layers")?.unwrap_or(0);
        if !on {
            return Ok((None, None));
        }
        if types.is_none() {
            types = Some(
                (0..layers)
                    .map(|i| {
                        if i >= from {
                            "sliding_attention".to_string()
                        } else {
                            "full_attention".to_string()
                        }
                    })
                    .collect(),
            );
        }
    }
    if let Some(ts) = &types {
        if ts.len() != layers as usize {
            return Err(cx.invalid(
                &t.field("layer_types"),
                format!("one entry per layer ({layers}), got {}", ts.len()),
            ));
        }
        if let Some(bad) = ts.iter().find(|s| !LAYER_TYPES.contains(&s.as_str())) {
            return Err(cx.invalid(
                &t.field("layer_types"),
                format!(
                    "one of {} per layer (the mixers rooftop models), got \"{bad}\"",
                    LAYER_TYPES.join(", ")
                ),
            ));
        }
    }
    let sliding = |ts: &Option<Vec<String>>| {
        ts.as_ref()
            .is_some_and(|v| v.iter().any(|s| s == "sliding_attention"))
    };
    // A list that says nothing beyond "full attention everywhere" is dropped.
    let trivial = |ts: &Option<Vec<String>>| {
        ts.as_ref().is_some_and(|v| {
            v.iter()
                .all(|s| s == "full_attention" || s == "deepseek_sparse_attention")
        })
    };
    match window {
        None => {
            if sliding(&types) {
                warnings.push(format!(
                    "{}layer_types has sliding_attention layers but sliding_window is absent; read as full attention",
                    t.path
                ));
            }
            if trivial(&types) {
                return Ok((None, None));
            }
            Ok((None, types))
        }
        Some(_) if types.is_some() && !sliding(&types) => {
            if trivial(&types) {
                Ok((None, None))
            } else {
                Ok((None, types))
            }
        }
        Some(w) => Ok((Some(w), types)),
    }
}

/// Module names of one family's layers.
struct Names {
    attn: &'static str,
    mlp: &'static str,
    /// gate, up, down of an expert and of a dense MLP.
    expert: [&'static str; 3],
    shared: &'static str,
}

impl Layout {
    fn names(&self) -> Names {
        match self.family {
            Family::Mixtral | Family::MiniMax => Names {
                attn: "self_attn",
                mlp: "block_sparse_moe",
                expert: ["w1", "w3", "w2"],
                shared: "shared_experts",
            },
            Family::NemotronH => Names {
                attn: "mixer",
                mlp: "mixer",
                expert: ["up_proj", "up_proj", "down_proj"],
                shared: "shared_experts",
            },
            Family::Llama4 => Names {
                attn: "self_attn",
                mlp: "feed_forward",
                expert: ["gate_proj", "up_proj", "down_proj"],
                shared: "shared_expert",
            },
            Family::Qwen35 | Family::Qwen3Moe => Names {
                attn: "self_attn",
                mlp: "mlp",
                expert: ["gate_proj", "up_proj", "down_proj"],
                shared: "shared_expert",
            },
            _ => Names {
                attn: "self_attn",
                mlp: "mlp",
                expert: ["gate_proj", "up_proj", "down_proj"],
                shared: "shared_experts",
            },
        }
    }

    /// The Linear modules of a group, named as the Hugging Face modeling code names them
    /// (experts: the first and the last one of each layer). Empty: the model lacks the group.
    pub(super) fn modules(&self, g: Group) -> Vec<String> {
        let p = &self.prefix;
        let n = self.names();
        let mut out = Vec::new();
        for (i, (&mixer, &ffn)) in self.mixers.iter().zip(&self.ffns).enumerate() {
            let l = format!("{p}.layers.{i}");
            match g {
                Group::Attention => {
                    let (sub, projs): (&str, &[&str]) = match mixer {
                        LayerMixer::Linear => {
                            ("linear_attn", &["in_proj_qkvz", "in_proj_ba", "out_proj"])
                        }
                        LayerMixer::Mamba => ("mixer", &["in_proj", "out_proj"]),
                        LayerMixer::None => ("", &[]),
                        LayerMixer::Attention => match (self.mla, self.q_lora) {
                            (true, true) => (
                                n.attn,
                                &[
                                    "q_a_proj",
                                    "q_b_proj",
                                    "kv_a_proj_with_mqa",
                                    "kv_b_proj",
                                    "o_proj",
                                ],
                            ),
                            (true, false) => (
                                n.attn,
                                &["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"],
                            ),
                            (false, _) => (n.attn, &["q_proj", "k_proj", "v_proj", "o_proj"]),
                        },
                    };
                    out.extend(projs.iter().map(|x| format!("{l}.{sub}.{x}")));
                }
                Group::DenseMlp if ffn == LayerFfn::Dense => {
                    let e = &n.expert;
                    let mats: &[&str] = if e[0] == e[1] { &e[1..] } else { e };
                    let sub = match self.family {
                        Family::Mixtral | Family::MiniMax => "mlp",
                        _ => n.mlp,
                    };
                    out.extend(mats.iter().map(|x| format!("{l}.{sub}.{x}")));
                }
                Group::SharedExperts if ffn == LayerFfn::Moe => {
                    if self.shared {
                        let e = &n.expert;
                        let mats: &[&str] = if e[0] == e[1] { &e[1..] } else { e };
                        let mats: Vec<&str> =
                            if matches!(self.family, Family::Mixtral | Family::MiniMax) {
                                vec!["gate_proj", "up_proj", "down_proj"]
                            } else {
                                mats.to_vec()
                            };
                        out.extend(
                            mats.iter()
                                .map(|x| format!("{l}.{}.{}.{x}", n.mlp, n.shared)),
                        );
                    }
                    // The latent projections are stored as this group (see ops::moe).
                    if self.latent {
                        out.extend(
                            ["fc1_latent_proj", "fc2_latent_proj"]
                                .iter()
                                .map(|x| format!("{l}.{}.{x}", n.mlp)),
                        );
                    }
                }
                Group::RoutedExperts if ffn == LayerFfn::Moe => {
                    let ends = [0, self.experts.saturating_sub(1)];
                    let ends = if ends[0] == ends[1] {
                        &ends[..1]
                    } else {
                        &ends[..]
                    };
                    match self.family {
                        Family::GptOss | Family::Llama4 => out.extend(
                            ["gate_up_proj", "down_proj"]
                                .iter()
                                .map(|x| format!("{l}.{}.experts.{x}", n.mlp)),
                        ),
                        _ => {
                            let e = &n.expert;
                            let mats: &[&str] = if e[0] == e[1] { &e[1..] } else { e };
                            for e in ends {
                                out.extend(
                                    mats.iter()
                                        .map(|x| format!("{l}.{}.experts.{e}.{x}", n.mlp)),
                                );
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if g == Group::LmHead {
            out.push(self.lm_head.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{llama, qwen3_moe};
    use super::super::import;
    use crate::spec::model::ModelSpec;
    use crate::spec::registry::parse_toml;

    #[test]
    fn qwen3_window_is_off_unless_use_sliding_window() {
        let off = import(
            &qwen3_moe(
                r#", "sliding_window": 32768, "use_sliding_window": false, "max_window_layers": 6"#,
            ),
            "q.json",
            None,
            None,
        )
        .unwrap();
        assert_eq!(off.model.config.sliding_window, None);
        assert!(off.warnings.is_empty(), "{:?}", off.warnings);
        let on = import(
            &qwen3_moe(
                r#", "sliding_window": 4096, "use_sliding_window": true, "max_window_layers": 4"#,
            ),
            "q.json",
            None,
            None,
        )
        .unwrap();
        assert_eq!(on.model.config.sliding_window, Some(4096));
        assert_eq!(on.model.window_of_layer(3), None);
        assert_eq!(on.model.window_of_layer(4), Some(4096));
    }

    #[test]
    fn qwen3_dense_layers_outside_a_leading_block_warn() {
        let lead = import(
            &qwen3_moe(r#", "mlp_only_layers": [0, 1]"#),
            "q.json",
            None,
            None,
        )
        .unwrap();
        assert_eq!(lead.model.config.first_k_dense_replace, Some(2));
        assert!(lead.toml.contains("first_k_dense_replace = 2    # derived"));
        assert_eq!(
            parse_toml::<ModelSpec>(&lead.toml, "t").unwrap(),
            lead.model
        );
        assert!(lead.warnings.is_empty(), "{:?}", lead.warnings);
        let scattered = import(
            &qwen3_moe(r#", "decoder_sparse_step": 2"#),
            "q.json",
            None,
            None,
        )
        .unwrap();
        assert_eq!(scattered.model.dense_layers(), 3);
        assert!(
            scattered
                .warnings
                .iter()
                .any(|w| w.contains("layers 0, 2, 4")),
            "{:?}",
            scattered.warnings
        );
    }

    #[test]
    fn llama_sliding_window_null_is_none_and_unknown_fields_warn() {
        let i = import(
            &llama(r#", "sliding_window": null, "frobnication": 3"#),
            "l.json",
            None,
            None,
        )
        .unwrap();
        assert_eq!(i.model.config.sliding_window, None);
        assert_eq!(i.warnings.len(), 1);
        assert!(i.warnings[0].contains("frobnication"));
        assert!(i.model.sources["notes"].contains("frobnication"));
    }

    #[test]
    fn known_unmodelled_architectures_say_why() {
        for (arch, what) in [
            ("MiMoV2FlashForCausalLM", "v_head_dim"),
            ("MiniMaxM3ForCausalLM", "MSA"),
            ("KimiK3ForConditionalGeneration", "no public config.json"),
            ("NemotronHPuzzleForCausalLM", "block_configs"),
        ] {
            let e = import(
                &format!(r#"{{"architectures": ["{arch}"], "hidden_size": 8}}"#),
                "x.json",
                None,
                None,
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("x.json") && e.contains(arch) && e.contains(what),
                "{e}"
            );
        }
    }

    #[test]
    fn missing_fields_are_errors() {
        let e = import(r#"{"architectures": ["MixtralForCausalLM"], "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 1, "vocab_size": 8, "num_local_experts": 8, "num_experts_per_tok": 2}"#,
            "m.json", None, None)
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("m.json") && e.contains("intermediate_size"),
            "{e}"
        );
    }
}
