//! `rooftop import-hf`: a Hugging Face `config.json` (with its `quantization_config`, or a
//! separate ModelOpt `hf_quant_config.json`) turned into rooftop's model description.
//!
//! Why it exists: every model a user wants to try ships a `config.json`, and transcribing
//! forty fields by hand is where descriptions go wrong (a dense width taken for the expert
//! width, a quantized group taken for BF16). The import reads the fields rooftop's
//! [`ModelConfig`] names (it uses the same names), derives the storage format of each weight
//! group from the quantization description, and writes TOML that `registry::load_model`
//! reads back to the same [`ModelSpec`].
//!
//! It touches no files: text in, spec + TOML + warnings out; the command and the registry do
//! the I/O. Nothing is dropped silently: a `config.json` field that is neither mapped nor in
//! [`IRRELEVANT`] is reported as a warning, and so is every approximation the import makes.
//!
//! Quantization is resolved per weight group by naming the group's Linear modules (as the
//! Hugging Face modeling code names them, e.g. `model.layers.3.mlp.experts.0.gate_proj`)
//! and asking the scheme's target/ignore patterns about each one:
//! - compressed-tensors: the first `config_groups` entry whose `targets` match, unless the
//!   `ignore` list does (`re:` patterns are Python `re.match`, others are module or class
//!   names); its `weights` scheme gives the format (int4 group g → `int4-g{g}`, 8-bit float
//!   → `fp8` or `fp8-block128`, 8-bit int → `int8`, 4-bit float group 16 → `nvfp4`).
//! - `fp8` (DeepSeek-V3 style) and `fbgemm_fp8`: every decoder Linear not in
//!   `modules_to_not_convert` → `fp8-block128` (with `weight_block_size` [128, 128]) or `fp8`;
//!   embedding and lm_head BF16.
//! - ModelOpt (`hf_quant_config.json`, or `quant_method: "modelopt"`): `quant_algo` NVFP4 →
//!   `nvfp4`, FP8 → `fp8`, on every Linear not matched by `exclude_modules` (glob patterns).
//! - `mxfp4` (gpt-oss): the routed experts → `mxfp4` unless in `modules_to_not_convert`.
//!
//! Routers and embeddings stay BF16 (rooftop's schema default); a group whose modules
//! disagree takes the majority format, with a warning.

use crate::error::{Error, Result};
use crate::spec::model::{KvDtype, ModelConfig, ModelSpec, QuantSpec, WeightFormat};
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The result of an import: the spec, what the reader should check, and the TOML text.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The model, as `registry::load_model` reads it back from `toml`.
    pub model: ModelSpec,
    /// Fields not understood and approximations made, one sentence each.
    pub warnings: Vec<String>,
    /// The model description, ready to save under `configs/models/` or pass to `--model`.
    pub toml: String,
}

/// Architectures (`architectures[0]`) the import understands. Any name containing both
/// "Glm" and "Moe" is read as the GLM MoE family as well.
pub const SUPPORTED: &[&str] = &[
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "KimiK25ForConditionalGeneration",
    "KimiVLForConditionalGeneration",
    "Glm4MoeForCausalLM",
    "GlmMoeDsaForCausalLM",
    "Qwen3MoeForCausalLM",
    "Qwen3ForCausalLM",
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "GptOssForCausalLM",
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
    // positional encoding
    "max_position_embeddings",
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
];

/// Architecture families: which field names carry the experts, and how layers are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    /// DeepSeek-V2/V3 and the Kimi models built on them (MLA, shared experts, leading dense).
    DeepSeek,
    /// GLM-4.5 (GQA) and GLM-5 (MLA + DSA): DeepSeek field names.
    GlmMoe,
    Qwen3Moe,
    Qwen3,
    /// Llama and Mistral: dense GQA.
    Llama,
    Mixtral,
    GptOss,
}

impl Family {
    fn of(arch: &str) -> Option<Family> {
        Some(match arch {
            "DeepseekV2ForCausalLM"
            | "DeepseekV3ForCausalLM"
            | "KimiK25ForConditionalGeneration"
            | "KimiVLForConditionalGeneration" => Family::DeepSeek,
            "Qwen3MoeForCausalLM" => Family::Qwen3Moe,
            "Qwen3ForCausalLM" => Family::Qwen3,
            "LlamaForCausalLM" | "MistralForCausalLM" => Family::Llama,
            "MixtralForCausalLM" => Family::Mixtral,
            "GptOssForCausalLM" => Family::GptOss,
            a if a.contains("Glm") && a.contains("Moe") => Family::GlmMoe,
            _ => return None,
        })
    }

    /// The `config.json` name of the routed-expert count (None: a dense family).
    fn experts_key(self) -> Option<&'static str> {
        match self {
            Family::DeepSeek | Family::GlmMoe => Some("n_routed_experts"),
            Family::Qwen3Moe => Some("num_experts"),
            Family::Mixtral | Family::GptOss => Some("num_local_experts"),
            Family::Qwen3 | Family::Llama => None,
        }
    }

    /// Families whose expert width is `moe_intermediate_size` (else `intermediate_size`).
    fn has_moe_intermediate(self) -> bool {
        matches!(self, Family::DeepSeek | Family::GlmMoe | Family::Qwen3Moe)
    }

    /// DeepSeek-style leading dense layers and shared experts.
    fn deepseek_style(self) -> bool {
        matches!(self, Family::DeepSeek | Family::GlmMoe)
    }
}

/// Where the file is and what is being read, for error messages.
struct Ctx<'a> {
    label: &'a str,
    text: &'a str,
    arch: String,
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

    fn invalid(&self, field: &str, expected: impl Into<String>) -> Error {
        Error::Invalid {
            file: self.label.to_string(),
            line: self.line_of(field),
            field: field.to_string(),
            expected: expected.into(),
        }
    }

    fn missing(&self, field: &str, what: &str) -> Error {
        Error::Invalid {
            file: self.label.to_string(),
            line: None,
            field: field.to_string(),
            expected: format!("{what} (required for {}; the field is missing)", self.arch),
        }
    }
}

/// One JSON object being read, remembering which keys were consumed.
struct Obj<'a> {
    map: &'a Map<String, Value>,
    /// Dotted path of the object in the file: "" or "text_config.".
    path: &'static str,
    used: BTreeSet<String>,
}

impl<'a> Obj<'a> {
    fn new(map: &'a Map<String, Value>, path: &'static str) -> Self {
        Obj {
            map,
            path,
            used: BTreeSet::new(),
        }
    }

    fn field(&self, key: &str) -> String {
        format!("{}{key}", self.path)
    }

    /// The value, marking the key read; JSON null reads as absent.
    fn get(&mut self, key: &str) -> Option<&'a Value> {
        self.used.insert(key.to_string());
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn u32(&mut self, cx: &Ctx, key: &str) -> Result<Option<u32>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => as_u32(v).map(Some).ok_or_else(|| {
                cx.invalid(&self.field(key), format!("a non-negative integer, got {v}"))
            }),
        }
    }

    fn req_u32(&mut self, cx: &Ctx, key: &str, what: &str) -> Result<u32> {
        self.u32(cx, key)?
            .ok_or_else(|| cx.missing(&self.field(key), what))
    }

    fn bool(&mut self, cx: &Ctx, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| cx.invalid(&self.field(key), format!("true or false, got {v}"))),
        }
    }

    fn strings(&mut self, cx: &Ctx, key: &str) -> Result<Option<Vec<String>>> {
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

    fn u32s(&mut self, cx: &Ctx, key: &str) -> Result<Option<Vec<u32>>> {
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

fn as_u32(v: &Value) -> Option<u32> {
    match v.as_u64() {
        Some(u) => u32::try_from(u).ok(),
        None => v
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u32::MAX as f64)
            .map(|f| f as u32),
    }
}

/// A JSON value shortened for a warning.
fn preview(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

/// Import a Hugging Face `config.json`.
///
/// `config_label` names the file in errors and in the TOML's `[sources]`; `quant_text` is a
/// separate quantization description `(text, label)` (ModelOpt's `hf_quant_config.json`),
/// which takes precedence over a `quantization_config` inside `config.json`. `name` is the
/// model's `name` (default: the folder holding `config.json`, else the file stem).
pub fn import(
    config_text: &str,
    config_label: &str,
    quant_text: Option<(&str, &str)>,
    name: Option<&str>,
) -> Result<Imported> {
    let root: Value = serde_json::from_str(config_text).map_err(|e| Error::Parse {
        file: config_label.to_string(),
        message: format!("not valid JSON: {e}"),
    })?;
    let root = root.as_object().ok_or_else(|| Error::Parse {
        file: config_label.to_string(),
        message: "expected a JSON object at the top level".into(),
    })?;
    let mut cx = Ctx {
        label: config_label,
        text: config_text,
        arch: String::new(),
    };
    let mut warnings = Vec::new();
    let mut top = Obj::new(root, "");

    // Architecture.
    let archs = top.strings(&cx, "architectures")?.unwrap_or_default();
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
    let family = Family::of(&arch).ok_or_else(|| {
        cx.invalid(
            "architectures",
            format!(
                "a supported architecture ({}, or any name containing both \"Glm\" and \"Moe\"); got \"{arch}\"",
                SUPPORTED.join(", ")
            ),
        )
    })?;
    cx.arch = arch.clone();

    // Vision-language wrappers keep the language model under `text_config`.
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
    if nested.is_none() && arch.ends_with("ForConditionalGeneration") {
        return Err(cx.missing(
            "text_config",
            "the language model's config (a vision-language wrapper keeps it there)",
        ));
    }
    if top.get("vision_config").is_some() {
        warnings.push(
            "vision_config: the vision encoder is not modelled; predictions and weight memory cover the language model only"
                .into(),
        );
    }
    let mut t = match nested {
        Some(m) => Obj::new(m, "text_config."),
        None => Obj::new(root, ""),
    };
    if nested.is_some() {
        // The inner language model's class (e.g. DeepseekV3ForCausalLM): read as `arch`'s.
        t.get("architectures");
    }

    let (config, keys, layout) = read_config(&cx, family, &mut t, &mut top, &mut warnings)?;

    // Quantization: a separate file wins; else `quantization_config` in text_config or at
    // the top level.
    let in_text = if nested.is_some() {
        t.get("quantization_config")
    } else {
        None
    };
    let at_top = top.get("quantization_config");
    let kv_top = t
        .get("kv_cache_dtype")
        .or_else(|| top.get("kv_cache_dtype"));
    let separate: Option<(Value, &str, &str)> = match quant_text {
        Some((qt, ql)) => Some((
            serde_json::from_str(qt).map_err(|e| Error::Parse {
                file: ql.to_string(),
                message: format!("not valid JSON: {e}"),
            })?,
            ql,
            qt,
        )),
        None => None,
    };
    let scheme = match (&separate, in_text, at_top) {
        (Some((v, ql, qt)), inner, outer) => {
            if let Some(q) = inner.or(outer) {
                let m = q.get("quant_method").and_then(Value::as_str).unwrap_or("?");
                if m != "modelopt" {
                    warnings.push(format!(
                        "{ql} given: the quantization_config in {config_label} (quant_method \"{m}\") was not used"
                    ));
                }
            }
            let qcx = Ctx {
                label: ql,
                text: qt,
                arch: arch.clone(),
            };
            parse_scheme(&qcx, v, "", &mut warnings)?
        }
        (None, Some(inner), outer) => {
            if outer.is_some() {
                warnings.push(
                    "quantization_config appears both at the top level and in text_config; used text_config's"
                        .into(),
                );
            }
            parse_scheme(&cx, inner, "text_config.quantization_config", &mut warnings)?
        }
        (None, None, Some(outer)) => {
            parse_scheme(&cx, outer, "quantization_config", &mut warnings)?
        }
        (None, None, None) => Scheme::none(),
    };
    let quant_label = separate.as_ref().map(|s| s.1.to_string());
    let mut kv_cache = scheme.kv_cache;
    if let Some(v) = kv_top {
        kv_cache = kv_dtype_named(v, &mut warnings);
    }

    let (quantization, per_group) = resolve_quant(&scheme, &layout, kv_cache, &mut warnings);

    if nested.is_some() {
        t.leftovers(&mut warnings);
        top.leftovers(&mut warnings);
    } else {
        // One object read through two handles.
        t.used.extend(top.used.iter().cloned());
        t.leftovers(&mut warnings);
    }

    let name = name
        .map(str::to_string)
        .unwrap_or_else(|| default_name(config_label));
    let mut sources = BTreeMap::new();
    let mut imported = format!("rooftop import-hf from {config_label}");
    if let Some(q) = &quant_label {
        let _ = write!(imported, " and {q}");
    }
    let _ = write!(imported, " (architecture {arch})");
    sources.insert("imported".to_string(), imported);
    sources.insert(
        "quantization".to_string(),
        scheme.describe(&per_group, kv_cache),
    );
    sources.insert(
        "notes".to_string(),
        if warnings.is_empty() {
            "no warnings: every config.json field was mapped or is known not to change the decode cost".into()
        } else {
            warnings.join("; ")
        },
    );

    let model = ModelSpec {
        name,
        full_name: format!("{arch} imported from {config_label}"),
        architecture: arch,
        published_total_params: None,
        published_active_params: None,
        config,
        quantization,
        eagle_head: None,
        sources,
    };
    model.validate().map_err(|(f, e)| {
        cx.invalid(&format!("{}{}", t.path, f.trim_start_matches("config.")), e)
    })?;
    let toml = render_toml(&model, &keys);
    Ok(Imported {
        model,
        warnings,
        toml,
    })
}

/// The folder holding `config.json` (a checkpoint's name), else the file stem.
fn default_name(label: &str) -> String {
    let p = std::path::Path::new(label);
    let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let from_dir = if stem == "config" {
        p.parent()
            .and_then(|d| d.file_name())
            .and_then(|s| s.to_str())
    } else {
        None
    };
    let n = from_dir.unwrap_or(stem).to_ascii_lowercase();
    if n.is_empty() {
        "imported".into()
    } else {
        n
    }
}

/// The `config.json` key names the TOML writes for the aliased fields.
struct Keys {
    experts: &'static str,
    top_k: &'static str,
    /// A note for `first_k_dense_replace` when it was derived, not read.
    first_k_note: Option<String>,
}

/// What the quantization resolver needs to name modules.
struct Layout {
    family: Family,
    /// Module prefix of the decoder: `model` or `language_model.model`.
    prefix: String,
    lm_head: String,
    layers: u32,
    /// Layers that are MoE (true) or dense (false), in the order rooftop models them.
    moe: Vec<bool>,
    experts: u32,
    shared: u32,
    mla: bool,
    q_lora: bool,
}

fn read_config(
    cx: &Ctx,
    family: Family,
    t: &mut Obj,
    top: &mut Obj,
    warnings: &mut Vec<String>,
) -> Result<(ModelConfig, Keys, Layout)> {
    let layers = t.req_u32(cx, "num_hidden_layers", "the number of decoder layers")?;
    // Checked before the per-layer tables below are built from it (the quantization of a
    // group is read from its layers' modules, so a model needs at least one).
    if !(1..=crate::spec::model::MAX_LAYERS).contains(&layers) {
        return Err(cx.invalid(
            &t.field("num_hidden_layers"),
            format!("between 1 and {} layers", crate::spec::model::MAX_LAYERS),
        ));
    }
    let hidden = t.req_u32(cx, "hidden_size", "the model width")?;
    let heads = t.req_u32(cx, "num_attention_heads", "the number of query heads")?;
    let vocab = t.req_u32(cx, "vocab_size", "the vocabulary size")?;
    let kv_heads = t.u32(cx, "num_key_value_heads")?;
    let head_dim = t.u32(cx, "head_dim")?;

    // MLA.
    let q_lora = t.u32(cx, "q_lora_rank")?;
    let kv_lora = t.u32(cx, "kv_lora_rank")?;
    let (mut nope, mut rope, mut v_dim) = (None, None, None);
    if family == Family::DeepSeek && kv_lora.is_none() {
        return Err(cx.missing(&t.field("kv_lora_rank"), "the MLA latent rank"));
    }
    if kv_lora.is_some() {
        nope = Some(t.req_u32(cx, "qk_nope_head_dim", "the MLA non-rotary head dimension")?);
        rope = Some(t.req_u32(cx, "qk_rope_head_dim", "the MLA rotary head dimension")?);
        v_dim = Some(t.req_u32(cx, "v_head_dim", "the MLA value head dimension")?);
        if let (Some(qk), Some(n), Some(r)) = (t.u32(cx, "qk_head_dim")?, nope, rope) {
            if qk != n + r {
                warnings.push(format!(
                    "{}qk_head_dim = {qk} is not qk_nope_head_dim + qk_rope_head_dim = {}; used the two parts",
                    t.path,
                    n + r
                ));
            }
        }
    }

    // Widths and experts.
    let intermediate = t.u32(cx, "intermediate_size")?;
    let moe_intermediate = t.u32(cx, "moe_intermediate_size")?;
    let mut keys = Keys {
        experts: "n_routed_experts",
        top_k: "num_experts_per_tok",
        first_k_note: None,
    };
    let experts = match family.experts_key() {
        Some(k) => {
            keys.experts = k;
            Some(t.req_u32(cx, k, "the number of routed experts")?)
        }
        None => None,
    }
    .filter(|e| *e > 0);
    let mut top_k = t.u32(cx, "num_experts_per_tok")?;
    if family == Family::GptOss {
        let alt = t.u32(cx, "experts_per_token")?;
        match (top_k, alt) {
            (Some(a), Some(b)) if a != b => warnings.push(format!(
                "{0}num_experts_per_tok = {a} and {0}experts_per_token = {b} disagree; used num_experts_per_tok",
                t.path
            )),
            (None, Some(b)) => {
                top_k = Some(b);
                keys.top_k = "experts_per_token";
            }
            _ => {}
        }
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
    if experts.is_none() && intermediate.is_none() {
        return Err(cx.missing(&t.field("intermediate_size"), "the MLP width"));
    }
    if experts.is_some() && !family.has_moe_intermediate() && intermediate.is_none() {
        return Err(cx.missing(&t.field("intermediate_size"), "the expert MLP width"));
    }
    let shared = if family.deepseek_style() {
        t.u32(cx, "n_shared_experts")?
    } else {
        None
    };

    // Which layers are MoE, as the Hugging Face modeling code decides it.
    let mut first_k = None;
    let moe: Vec<bool> = match (family, experts) {
        (_, None) => vec![false; layers as usize],
        (Family::DeepSeek | Family::GlmMoe, Some(_)) => {
            first_k = t.u32(cx, "first_k_dense_replace")?;
            let freq = t.u32(cx, "moe_layer_freq")?.unwrap_or(1).max(1);
            let k = first_k.unwrap_or(0);
            (0..layers).map(|i| i >= k && i % freq == 0).collect()
        }
        (Family::Qwen3Moe, Some(_)) => {
            let only = t.u32s(cx, "mlp_only_layers")?.unwrap_or_default();
            let step = t.u32(cx, "decoder_sparse_step")?.unwrap_or(1).max(1);
            (0..layers)
                .map(|i| !only.contains(&i) && (i + 1) % step == 0)
                .collect()
        }
        (_, Some(_)) => vec![true; layers as usize],
    };
    let dense = moe.iter().filter(|m| !**m).count() as u32;
    let leading = moe.iter().take_while(|m| !**m).count() as u32;
    if experts.is_some() && dense != first_k.unwrap_or(0) {
        let which: Vec<String> = moe
            .iter()
            .enumerate()
            .filter(|(_, m)| !**m)
            .map(|(i, _)| i.to_string())
            .collect();
        if dense != leading {
            warnings.push(format!(
                "layers {} have a dense MLP, not only a leading block; rooftop models dense layers as the first ones, so first_k_dense_replace = {dense} (same per-step totals; a pipeline split may differ)",
                which.join(", ")
            ));
        }
        keys.first_k_note = Some(format!(
            "derived: {dense} dense layer(s) from {}",
            if family == Family::Qwen3Moe {
                "mlp_only_layers / decoder_sparse_step"
            } else {
                "first_k_dense_replace / moe_layer_freq"
            }
        ));
        first_k = Some(dense);
    }
    let moe: Vec<bool> = (0..layers)
        .map(|i| experts.is_some() && i >= first_k.unwrap_or(0))
        .collect();
    if dense > 0 && intermediate.is_none() {
        return Err(cx.missing(&t.field("intermediate_size"), "the dense MLP width"));
    }

    let tie = match t.bool(cx, "tie_word_embeddings")? {
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
    };
    let nextn = t.u32(cx, "num_nextn_predict_layers")?;

    // Attention windows.
    let (sliding, layer_types) = read_windows(cx, family, t, layers, warnings)?;

    // DeepSeek sparse attention.
    let index_topk = t.u32(cx, "index_topk")?;
    let index_n_heads = t.u32(cx, "index_n_heads")?;
    let index_head_dim = t.u32(cx, "index_head_dim")?;

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

    let config = ModelConfig {
        num_hidden_layers: layers,
        hidden_size: hidden,
        num_attention_heads: heads,
        num_key_value_heads: kv_heads,
        head_dim,
        q_lora_rank: q_lora,
        kv_lora_rank: kv_lora,
        qk_nope_head_dim: nope,
        qk_rope_head_dim: rope,
        v_head_dim: v_dim,
        intermediate_size: intermediate,
        moe_intermediate_size: if experts.is_some() {
            moe_intermediate
        } else {
            None
        },
        n_routed_experts: experts,
        num_experts_per_tok: if experts.is_some() { top_k } else { None },
        n_shared_experts: shared,
        first_k_dense_replace: first_k,
        vocab_size: vocab,
        tie_word_embeddings: tie,
        num_nextn_predict_layers: nextn,
        sliding_window: sliding,
        layer_types,
        index_topk,
        index_n_heads,
        index_head_dim,
    };
    if experts.is_none() {
        // Dense families: these keys mean nothing here; leave them to the leftovers check.
        for k in ["moe_intermediate_size", "num_experts_per_tok"] {
            if t.map.get(k).is_some_and(|v| !v.is_null()) {
                t.used.remove(k);
            }
        }
    }
    let nested = t.path == "text_config.";
    let layout = Layout {
        family,
        prefix: if nested {
            "language_model.model".into()
        } else {
            "model".into()
        },
        lm_head: if nested {
            "language_model.lm_head".into()
        } else {
            "lm_head".into()
        },
        layers,
        moe,
        experts: experts.unwrap_or(0),
        shared: shared.unwrap_or(0),
        mla: kv_lora.is_some(),
        q_lora: q_lora.is_some(),
    };
    Ok((config, keys, layout))
}

/// `sliding_window` and `layer_types`, normalised: no window when no layer uses one.
fn read_windows(
    cx: &Ctx,
    family: Family,
    t: &mut Obj,
    layers: u32,
    warnings: &mut Vec<String>,
) -> Result<(Option<u32>, Option<Vec<String>>)> {
    let window = t.u32(cx, "sliding_window")?;
    let mut types = t.strings(cx, "layer_types")?;
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
        if let Some(bad) = ts
            .iter()
            .find(|s| s.as_str() != "sliding_attention" && s.as_str() != "full_attention")
        {
            return Err(cx.invalid(
                &t.field("layer_types"),
                format!("\"sliding_attention\" or \"full_attention\" per layer (rooftop models no other kind), got \"{bad}\""),
            ));
        }
    }
    let any_sliding = |ts: &Option<Vec<String>>| {
        ts.as_ref()
            .is_none_or(|v| v.iter().any(|s| s == "sliding_attention"))
    };
    match window {
        None => {
            if types
                .as_ref()
                .is_some_and(|v| v.iter().any(|s| s == "sliding_attention"))
            {
                warnings.push(format!(
                    "{}layer_types has sliding_attention layers but sliding_window is absent; read as full attention",
                    t.path
                ));
            }
            Ok((None, None))
        }
        Some(_) if !any_sliding(&types) => Ok((None, None)),
        Some(w) => Ok((Some(w), types)),
    }
}

/// Weight groups rooftop stores one format for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    Attention,
    DenseMlp,
    SharedExperts,
    RoutedExperts,
    LmHead,
}

impl Group {
    fn name(self) -> &'static str {
        match self {
            Group::Attention => "attention",
            Group::DenseMlp => "dense MLP",
            Group::SharedExperts => "shared experts",
            Group::RoutedExperts => "routed experts",
            Group::LmHead => "lm_head",
        }
    }
}

impl Layout {
    /// The Linear modules of a group, named as the Hugging Face modeling code names them
    /// (experts: the first and the last one of each layer). Empty: the model lacks the group.
    fn modules(&self, g: Group) -> Vec<String> {
        let p = &self.prefix;
        let mut out = Vec::new();
        let proj3 = ["gate_proj", "up_proj", "down_proj"];
        for i in 0..self.layers {
            let l = format!("{p}.layers.{i}");
            let moe = self.moe[i as usize];
            match g {
                Group::Attention => {
                    let projs: &[&str] = match (self.mla, self.q_lora) {
                        (true, true) => &[
                            "q_a_proj",
                            "q_b_proj",
                            "kv_a_proj_with_mqa",
                            "kv_b_proj",
                            "o_proj",
                        ],
                        (true, false) => &["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"],
                        (false, _) => &["q_proj", "k_proj", "v_proj", "o_proj"],
                    };
                    out.extend(projs.iter().map(|x| format!("{l}.self_attn.{x}")));
                }
                Group::DenseMlp if !moe => {
                    out.extend(proj3.iter().map(|x| format!("{l}.mlp.{x}")));
                }
                Group::SharedExperts if moe && self.shared > 0 => {
                    out.extend(proj3.iter().map(|x| format!("{l}.mlp.shared_experts.{x}")));
                }
                Group::RoutedExperts if moe => {
                    let ends = [0, self.experts.saturating_sub(1)];
                    let ends = if ends[0] == ends[1] {
                        &ends[..1]
                    } else {
                        &ends[..]
                    };
                    match self.family {
                        Family::GptOss => out.extend(
                            ["gate_up_proj", "down_proj"]
                                .iter()
                                .map(|x| format!("{l}.mlp.experts.{x}")),
                        ),
                        Family::Mixtral => {
                            for e in ends {
                                out.extend(
                                    ["w1", "w2", "w3"]
                                        .iter()
                                        .map(|x| format!("{l}.block_sparse_moe.experts.{e}.{x}")),
                                );
                            }
                        }
                        _ => {
                            for e in ends {
                                out.extend(
                                    proj3.iter().map(|x| format!("{l}.mlp.experts.{e}.{x}")),
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

/// A module-name pattern from a target, ignore or exclude list.
#[derive(Debug, Clone)]
enum Pattern {
    /// `re:...`: Python `re.match` (anchored at the start) against the module name.
    Regex(Regex),
    /// A glob (`*`, `?`) matched in full against the module or one of its parents.
    Glob(Regex),
    /// A class name such as `Linear` (every module rooftop names is a Linear layer).
    Class(String),
    /// A dotted name matching the module, a parent, or a suffix at a `.` boundary.
    Name(String),
}

impl Pattern {
    fn parse(p: &str, cx: &Ctx, field: &str) -> Result<Pattern> {
        if let Some(r) = p.strip_prefix("re:") {
            return Regex::new(&format!("^(?:{r})"))
                .map(Pattern::Regex)
                .map_err(|e| {
                    cx.invalid(
                        field,
                        format!("regular expressions rooftop can read; \"{p}\" is not ({e})"),
                    )
                });
        }
        if p.contains(['*', '?']) {
            let mut s = String::from("^");
            for c in p.chars() {
                match c {
                    '*' => s.push_str(".*"),
                    '?' => s.push('.'),
                    c => s.push_str(&regex::escape(&c.to_string())),
                }
            }
            s.push('$');
            return Regex::new(&s)
                .map(Pattern::Glob)
                .map_err(|e| cx.invalid(field, format!("glob patterns; \"{p}\" is not ({e})")));
        }
        if !p.contains('.') && p.starts_with(|c: char| c.is_ascii_uppercase()) {
            return Ok(Pattern::Class(p.to_string()));
        }
        Ok(Pattern::Name(p.to_string()))
    }

    fn matches(&self, module: &str) -> bool {
        match self {
            Pattern::Regex(r) => r.is_match(module),
            Pattern::Glob(r) => {
                r.is_match(module)
                    || module
                        .match_indices('.')
                        .any(|(i, _)| r.is_match(&module[..i]))
            }
            Pattern::Class(c) => c == "Linear",
            Pattern::Name(n) => format!(".{module}.").contains(&format!(".{n}.")),
        }
    }
}

fn patterns(cx: &Ctx, v: Option<&Value>, field: &str) -> Result<Vec<Pattern>> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| match x.as_str() {
                Some(s) => Pattern::parse(s, cx, field),
                None => Err(cx.invalid(field, format!("a list of module names, got {x}"))),
            })
            .collect(),
        Some(Value::String(s)) => Ok(vec![Pattern::parse(s, cx, field)?]),
        Some(x) => Err(cx.invalid(field, format!("a list of module names, got {}", preview(x)))),
    }
}

/// How a checkpoint stores its weights, as far as rooftop needs to know.
struct Scheme {
    rule: Rule,
    kv_cache: KvDtype,
    /// One line on where the formats came from, for `[sources]`.
    summary: String,
}

enum Rule {
    /// Unquantized.
    None,
    /// Every Linear not excluded gets `format`; lm_head too unless `lm_head_bf16`.
    AllLinear {
        format: WeightFormat,
        exclude: Vec<Pattern>,
        lm_head_bf16: bool,
    },
    /// Only the routed experts are converted.
    ExpertsOnly {
        format: WeightFormat,
        exclude: Vec<Pattern>,
    },
    /// compressed-tensors: the first group whose targets match, unless ignored.
    Groups {
        groups: Vec<(Vec<Pattern>, WeightFormat)>,
        ignore: Vec<Pattern>,
    },
}

impl Scheme {
    fn none() -> Scheme {
        Scheme {
            rule: Rule::None,
            kv_cache: KvDtype::Bf16,
            summary: "no quantization_config: weights BF16 as shipped".into(),
        }
    }

    fn format_of(&self, g: Group, module: &str) -> WeightFormat {
        let excluded = |ps: &[Pattern]| ps.iter().any(|p| p.matches(module));
        match &self.rule {
            Rule::None => WeightFormat::BF16,
            Rule::AllLinear {
                format,
                exclude,
                lm_head_bf16,
            } => {
                if (g == Group::LmHead && *lm_head_bf16) || excluded(exclude) {
                    WeightFormat::BF16
                } else {
                    *format
                }
            }
            Rule::ExpertsOnly { format, exclude } => {
                if g == Group::RoutedExperts && !excluded(exclude) {
                    *format
                } else {
                    WeightFormat::BF16
                }
            }
            Rule::Groups { groups, ignore } => {
                if excluded(ignore) {
                    return WeightFormat::BF16;
                }
                groups
                    .iter()
                    .find(|(targets, _)| excluded(targets))
                    .map(|(_, f)| *f)
                    .unwrap_or(WeightFormat::BF16)
            }
        }
    }

    fn describe(&self, per_group: &BTreeMap<Group, WeightFormat>, kv: KvDtype) -> String {
        let groups: Vec<String> = per_group
            .iter()
            .map(|(g, f)| format!("{} {f}", g.name()))
            .collect();
        format!(
            "{}; resolved per weight group: {}, embedding and router bf16; kv_cache {}",
            self.summary,
            groups.join(", "),
            kv_name(kv)
        )
    }
}

fn kv_name(k: KvDtype) -> &'static str {
    match k {
        KvDtype::Bf16 => "bf16",
        KvDtype::Fp16 => "fp16",
        KvDtype::Fp8 => "fp8",
    }
}

/// A KV dtype given by name (`kv_cache_dtype`, ModelOpt's `kv_cache_quant_algo`).
fn kv_dtype_named(v: &Value, warnings: &mut Vec<String>) -> KvDtype {
    let s = v.as_str().unwrap_or("").to_ascii_lowercase();
    match s.as_str() {
        "" | "auto" | "bf16" | "bfloat16" => KvDtype::Bf16,
        "fp16" | "float16" | "half" => KvDtype::Fp16,
        x if x.starts_with("fp8") || x == "int8" => KvDtype::Fp8,
        _ => {
            warnings.push(format!(
                "KV-cache dtype {v} is not one rooftop models (bf16, fp16, fp8); used bf16"
            ));
            KvDtype::Bf16
        }
    }
}

fn parse_fmt(s: &str) -> WeightFormat {
    s.parse().expect("built-in format string")
}

/// Read a quantization description: `config.json`'s `quantization_config` (at `path`), or a
/// ModelOpt `hf_quant_config.json` (path "").
fn parse_scheme(cx: &Ctx, v: &Value, path: &str, warnings: &mut Vec<String>) -> Result<Scheme> {
    let f = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    let m = v.as_object().ok_or_else(|| {
        cx.invalid(
            &f("quant_method"),
            "a quantization description (a JSON object)",
        )
    })?;
    // hf_quant_config.json: {"producer": ..., "quantization": {"quant_algo": ...}}
    if let Some(Value::Object(q)) = m.get("quantization") {
        return modelopt(cx, q, &f("quantization"), warnings);
    }
    let method = m
        .get("quant_method")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            cx.invalid(
                &f("quant_method"),
                "the quantization method (compressed-tensors, fp8, fbgemm_fp8, modelopt, mxfp4)",
            )
        })?;
    match method {
        "compressed-tensors" => compressed_tensors(cx, m, path, warnings),
        "fp8" | "fbgemm_fp8" => {
            let block = m.get("weight_block_size").filter(|b| !b.is_null());
            let format = match block.and_then(Value::as_array).map(|a| a.iter().map(as_u32).collect::<Vec<_>>()) {
                None => parse_fmt("fp8"),
                Some(b) if b == [Some(128), Some(128)] => parse_fmt("fp8-block128"),
                Some(_) => {
                    warnings.push(format!(
                        "{} = {}: rooftop knows 128x128 blocks only; used fp8 without scale bytes",
                        f("weight_block_size"),
                        preview(block.unwrap_or(&Value::Null))
                    ));
                    parse_fmt("fp8")
                }
            };
            let mut exclude = patterns(cx, m.get("modules_to_not_convert"), &f("modules_to_not_convert"))?;
            exclude.extend(patterns(cx, m.get("ignored_layers"), &f("ignored_layers"))?);
            let kv = match m.get("kv_cache_dtype") {
                Some(k) => kv_dtype_named(k, warnings),
                None => KvDtype::Bf16,
            };
            Ok(Scheme {
                rule: Rule::AllLinear {
                    format,
                    exclude,
                    lm_head_bf16: true,
                },
                kv_cache: kv,
                summary: format!(
                    "{} quant_method \"{method}\"{}: {format} on the decoder's Linear layers not in modules_to_not_convert; lm_head and embedding BF16",
                    cx.label,
                    block.map(|b| format!(", weight_block_size {b}")).unwrap_or_default()
                ),
            })
        }
        "modelopt" => modelopt(cx, m, path, warnings),
        "mxfp4" => {
            let exclude = patterns(cx, m.get("modules_to_not_convert"), &f("modules_to_not_convert"))?;
            Ok(Scheme {
                rule: Rule::ExpertsOnly {
                    format: parse_fmt("mxfp4"),
                    exclude,
                },
                kv_cache: KvDtype::Bf16,
                summary: format!(
                    "{} quant_method \"mxfp4\": routed experts MXFP4 (e2m1 + one 8-bit scale per 32 weights) unless in modules_to_not_convert; everything else BF16",
                    cx.label
                ),
            })
        }
        other => Err(cx.invalid(
            &f("quant_method"),
            format!(
                "a quantization method rooftop can import (compressed-tensors, fp8, fbgemm_fp8, modelopt, mxfp4); got \"{other}\""
            ),
        )),
    }
}

/// ModelOpt: `quant_algo` on every Linear not in `exclude_modules` (or `ignore`).
fn modelopt(
    cx: &Ctx,
    q: &Map<String, Value>,
    path: &str,
    warnings: &mut Vec<String>,
) -> Result<Scheme> {
    let f = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    let algo = q.get("quant_algo").and_then(Value::as_str).ok_or_else(|| {
        cx.invalid(
            &f("quant_algo"),
            "ModelOpt's quantization algorithm (NVFP4 or FP8)",
        )
    })?;
    let format = match algo.to_ascii_uppercase().as_str() {
        "NVFP4" => {
            if let Some(g) = q.get("group_size").and_then(as_u32) {
                if g != 16 {
                    warnings.push(format!(
                        "{} = {g}: NVFP4 in rooftop has one scale per 16 weights",
                        f("group_size")
                    ));
                }
            }
            parse_fmt("nvfp4")
        }
        "FP8" => parse_fmt("fp8"),
        _ => {
            return Err(cx.invalid(
                &f("quant_algo"),
                format!("a ModelOpt algorithm rooftop can import (NVFP4, FP8); got \"{algo}\""),
            ))
        }
    };
    let mut exclude = patterns(cx, q.get("exclude_modules"), &f("exclude_modules"))?;
    exclude.extend(patterns(cx, q.get("ignore"), &f("ignore"))?);
    let kv_cache = match (q.get("kv_cache_quant_algo"), q.get("kv_cache_scheme")) {
        (Some(k), _) if !k.is_null() => kv_dtype_named(k, warnings),
        (_, Some(s)) if !s.is_null() => kv_scheme(s, warnings),
        _ => KvDtype::Bf16,
    };
    Ok(Scheme {
        rule: Rule::AllLinear {
            format,
            exclude,
            lm_head_bf16: false,
        },
        kv_cache,
        summary: format!(
            "{} ModelOpt quant_algo \"{algo}\": {format} on every Linear layer not matched by exclude_modules",
            cx.label
        ),
    })
}

/// compressed-tensors `kv_cache_scheme`.
fn kv_scheme(s: &Value, warnings: &mut Vec<String>) -> KvDtype {
    let bits = s.get("num_bits").and_then(as_u32);
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    match (bits, ty) {
        (Some(8), "float") => KvDtype::Fp8,
        (Some(8), _) => {
            warnings.push(format!(
                "kv_cache_scheme {}: 8-bit non-float KV read as fp8 (same bytes)",
                preview(s)
            ));
            KvDtype::Fp8
        }
        (Some(16), _) => KvDtype::Bf16,
        _ => {
            warnings.push(format!(
                "kv_cache_scheme {} is not one rooftop models (8-bit float); used bf16",
                preview(s)
            ));
            KvDtype::Bf16
        }
    }
}

fn compressed_tensors(
    cx: &Ctx,
    m: &Map<String, Value>,
    path: &str,
    warnings: &mut Vec<String>,
) -> Result<Scheme> {
    let f = |k: &str| format!("{path}.{k}");
    let cfg_groups = match m.get("config_groups") {
        Some(Value::Object(g)) => g,
        _ => {
            return Err(cx.missing(
                &f("config_groups"),
                "compressed-tensors' quantization groups (targets and weight scheme)",
            ))
        }
    };
    let mut groups = Vec::new();
    let mut summary = Vec::new();
    for (gname, g) in cfg_groups {
        let gf = f(&format!("config_groups.{gname}"));
        let targets = patterns(cx, g.get("targets"), &format!("{gf}.targets"))?;
        let Some(w) = g.get("weights").filter(|w| !w.is_null()) else {
            continue; // activation-only group: weights stay as they are
        };
        let fmt = ct_weight_format(cx, w, &format!("{gf}.weights"), warnings)?;
        let t: Vec<String> = g
            .get("targets")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        summary.push(format!("{gname} {fmt} on {}", t.join(", ")));
        groups.push((targets, fmt));
    }
    let ignore = patterns(cx, m.get("ignore"), &f("ignore"))?;
    let kv_cache = match m.get("kv_cache_scheme") {
        Some(s) if !s.is_null() => kv_scheme(s, warnings),
        _ => KvDtype::Bf16,
    };
    let format = m.get("format").and_then(Value::as_str).unwrap_or("?");
    let ignored: Vec<&str> = m
        .get("ignore")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Ok(Scheme {
        rule: Rule::Groups { groups, ignore },
        kv_cache,
        summary: format!(
            "{} compressed-tensors ({format}): {}; ignore [{}] stays BF16",
            cx.label,
            summary.join("; "),
            ignored.join(", ")
        ),
    })
}

/// A compressed-tensors weight scheme as a rooftop format.
fn ct_weight_format(
    cx: &Ctx,
    w: &Value,
    field: &str,
    warnings: &mut Vec<String>,
) -> Result<WeightFormat> {
    let bits = w.get("num_bits").and_then(as_u32);
    let ty = w.get("type").and_then(Value::as_str).unwrap_or("int");
    let strategy = w
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or("tensor");
    let group = w.get("group_size").and_then(as_u32);
    let symmetric = w.get("symmetric").and_then(Value::as_bool).unwrap_or(true);
    let unsupported = || {
        cx.invalid(
            field,
            format!(
                "a weight scheme rooftop can import (int4 group-scaled, 8-bit float, 8-bit int, 4-bit float group 16); got {}",
                preview(w)
            ),
        )
    };
    let fmt = match (bits, ty) {
        (Some(4), "int") => match (strategy, group) {
            ("group", Some(g)) if g > 0 => parse_fmt(&format!("int4-g{g}")),
            _ => return Err(unsupported()),
        },
        (Some(8), "float") => {
            let block = w
                .get("block_structure")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(as_u32).collect::<Vec<_>>());
            match (strategy, block) {
                ("block", Some(b)) if b == [Some(128), Some(128)] => parse_fmt("fp8-block128"),
                ("block", _) => {
                    warnings.push(format!(
                        "{field}: FP8 block structure other than 128x128; used fp8 without scale bytes"
                    ));
                    parse_fmt("fp8")
                }
                _ => parse_fmt("fp8"),
            }
        }
        (Some(8), "int") => parse_fmt("int8"),
        (Some(4), "float") => match group {
            Some(16) => parse_fmt("nvfp4"),
            Some(32) => parse_fmt("mxfp4"),
            _ => return Err(unsupported()),
        },
        _ => return Err(unsupported()),
    };
    if !symmetric && ty == "int" {
        warnings.push(format!(
            "{field}: asymmetric (zero points); rooftop counts the scales only"
        ));
    }
    Ok(fmt)
}

/// Formats per group → the compact `[quantization]` table: `default` is the format most
/// groups share (ties: attention's), the others are named.
fn resolve_quant(
    scheme: &Scheme,
    layout: &Layout,
    kv: KvDtype,
    warnings: &mut Vec<String>,
) -> (QuantSpec, BTreeMap<Group, WeightFormat>) {
    let mut per: BTreeMap<Group, WeightFormat> = BTreeMap::new();
    for g in [
        Group::Attention,
        Group::DenseMlp,
        Group::SharedExperts,
        Group::RoutedExperts,
        Group::LmHead,
    ] {
        let mods = layout.modules(g);
        if mods.is_empty() {
            continue;
        }
        let mut counts: Vec<(WeightFormat, usize)> = Vec::new();
        for m in &mods {
            let f = scheme.format_of(g, m);
            match counts.iter_mut().find(|(x, _)| *x == f) {
                Some(c) => c.1 += 1,
                None => counts.push((f, 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        if counts.len() > 1 {
            let parts: Vec<String> = counts.iter().map(|(f, n)| format!("{n} {f}")).collect();
            warnings.push(format!(
                "{}: its Linear layers are stored in more than one format ({} of {} checked); rooftop stores one format per group: used {}",
                g.name(),
                parts.join(", "),
                mods.len(),
                counts[0].0
            ));
        }
        per.insert(g, counts[0].0);
    }
    let attention = per[&Group::Attention];
    let decoder: Vec<WeightFormat> = per
        .iter()
        .filter(|(g, _)| **g != Group::LmHead)
        .map(|(_, f)| *f)
        .collect();
    let mut default = attention;
    let mut best = decoder.iter().filter(|f| **f == attention).count();
    for f in &decoder {
        let n = decoder.iter().filter(|x| *x == f).count();
        if n > best {
            best = n;
            default = *f;
        }
    }
    let named = |g: Group| per.get(&g).copied().filter(|f| *f != default);
    let q = QuantSpec {
        default,
        attention: named(Group::Attention),
        dense_mlp: named(Group::DenseMlp),
        shared_experts: named(Group::SharedExperts),
        routed_experts: named(Group::RoutedExperts),
        lm_head: per
            .get(&Group::LmHead)
            .copied()
            .filter(|f| *f != WeightFormat::BF16),
        embedding: None,
        router: None,
        kv_cache: kv,
    };
    (q, per)
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The model as TOML, `[config]` keys named as in the source `config.json`.
fn render_toml(m: &ModelSpec, keys: &Keys) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Imported by `rooftop import-hf`; field names under [config] as in config.json.\n# Check [sources].notes for fields the import did not map."
    );
    let _ = writeln!(o, "name = {}", toml_str(&m.name));
    let _ = writeln!(o, "full_name = {}", toml_str(&m.full_name));
    let _ = writeln!(o, "architecture = {}", toml_str(&m.architecture));
    let _ = writeln!(o, "\n[config]");
    let c = &m.config;
    let mut kv = |k: &str, v: Option<u32>| {
        if let Some(v) = v {
            let _ = writeln!(o, "{k} = {v}");
        }
    };
    kv("num_hidden_layers", Some(c.num_hidden_layers));
    kv("hidden_size", Some(c.hidden_size));
    kv("num_attention_heads", Some(c.num_attention_heads));
    kv("num_key_value_heads", c.num_key_value_heads);
    kv("head_dim", c.head_dim);
    kv("q_lora_rank", c.q_lora_rank);
    kv("kv_lora_rank", c.kv_lora_rank);
    kv("qk_nope_head_dim", c.qk_nope_head_dim);
    kv("qk_rope_head_dim", c.qk_rope_head_dim);
    kv("v_head_dim", c.v_head_dim);
    kv("intermediate_size", c.intermediate_size);
    kv("moe_intermediate_size", c.moe_intermediate_size);
    kv(keys.experts, c.n_routed_experts);
    kv(keys.top_k, c.num_experts_per_tok);
    kv("n_shared_experts", c.n_shared_experts);
    if let Some(k) = c.first_k_dense_replace {
        match &keys.first_k_note {
            Some(n) => {
                let _ = writeln!(o, "first_k_dense_replace = {k}    # {n}");
            }
            None => {
                let _ = writeln!(o, "first_k_dense_replace = {k}");
            }
        }
    }
    let _ = writeln!(o, "vocab_size = {}", c.vocab_size);
    let _ = writeln!(o, "tie_word_embeddings = {}", c.tie_word_embeddings);
    let mut kv = |k: &str, v: Option<u32>| {
        if let Some(v) = v {
            let _ = writeln!(o, "{k} = {v}");
        }
    };
    kv("num_nextn_predict_layers", c.num_nextn_predict_layers);
    kv("sliding_window", c.sliding_window);
    if let Some(types) = &c.layer_types {
        let _ = writeln!(o, "layer_types = [");
        for pair in types.chunks(2) {
            let items: Vec<String> = pair.iter().map(|s| toml_str(s)).collect();
            let _ = writeln!(o, "    {},", items.join(", "));
        }
        let _ = writeln!(o, "]");
    }
    let mut kv = |k: &str, v: Option<u32>| {
        if let Some(v) = v {
            let _ = writeln!(o, "{k} = {v}");
        }
    };
    kv("index_topk", c.index_topk);
    kv("index_n_heads", c.index_n_heads);
    kv("index_head_dim", c.index_head_dim);

    let q = &m.quantization;
    let _ = writeln!(o, "\n[quantization]");
    let _ = writeln!(o, "default = \"{}\"", q.default);
    for (k, v) in [
        ("attention", q.attention),
        ("dense_mlp", q.dense_mlp),
        ("shared_experts", q.shared_experts),
        ("routed_experts", q.routed_experts),
        ("lm_head", q.lm_head),
        ("embedding", q.embedding),
        ("router", q.router),
    ] {
        if let Some(v) = v {
            let _ = writeln!(o, "{k} = \"{v}\"");
        }
    }
    let _ = writeln!(o, "kv_cache = \"{}\"", kv_name(q.kv_cache));

    let _ = writeln!(o, "\n[sources]");
    for (k, v) in &m.sources {
        let _ = writeln!(o, "{k} = {}", toml_str(v));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::registry::parse_toml;
    use crate::spec::FormatKind;

    fn llama(extra: &str) -> String {
        format!(
            r#"{{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 4,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 128256, "tie_word_embeddings": false, "rope_theta": 500000.0{extra}}}"#
        )
    }

    fn qwen3_moe(extra: &str) -> String {
        format!(
            r#"{{"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 6,
            "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
            "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
            "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": false{extra}}}"#
        )
    }

    fn cx() -> Ctx<'static> {
        Ctx {
            label: "t.json",
            text: "",
            arch: "X".into(),
        }
    }

    #[test]
    fn patterns_follow_regex_glob_and_name_rules() {
        let c = cx();
        let p = |s: &str| Pattern::parse(s, &c, "ignore").unwrap();
        let m = "language_model.model.layers.0.mlp.gate_proj";
        assert!(p("re:.*layers\\.0\\.mlp.*").matches(m));
        assert!(
            !p("re:layers\\.0").matches(m),
            "re: is anchored at the start"
        );
        assert!(p("*.layers.*.mlp*").matches(m));
        assert!(p("model.layers.0.mlp").matches("model.layers.0.mlp.up_proj"));
        assert!(!p("model.layers.*.mlp.gate").matches("model.layers.0.mlp.gate_proj"));
        assert!(p("lm_head").matches("language_model.lm_head"));
        assert!(!p("lm_head").matches("model.lm_head_extra"));
        assert!(p("Linear").matches(m));
        assert!(Pattern::parse("re:(", &c, "ignore").is_err());
    }

    #[test]
    fn toml_reads_back_to_the_same_spec() {
        let i = import(&qwen3_moe(""), "x/Qwen3-30B/config.json", None, None).unwrap();
        let back: ModelSpec = parse_toml(&i.toml, "t").unwrap();
        assert_eq!(back, i.model);
        assert_eq!(i.model.name, "qwen3-30b");
        assert!(i.toml.contains("num_experts = 128"), "{}", i.toml);
    }

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
    fn modelopt_in_config_json_and_fp8_kv() {
        let q = r#", "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
            "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}"#;
        let i = import(&llama(q), "l.json", None, None).unwrap();
        let qs = &i.model.quantization;
        assert_eq!(qs.dense_mlp().kind, FormatKind::Nvfp4);
        assert_eq!(qs.attention(), WeightFormat::BF16);
        assert_eq!(qs.lm_head(), WeightFormat::BF16);
        assert_eq!(qs.kv_cache, KvDtype::Fp8);
    }

    #[test]
    fn quantization_config_at_top_level_of_a_nested_config() {
        let text = r#"{"architectures": ["KimiVLForConditionalGeneration"],
          "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
          "text_config": {"hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
            "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
            "intermediate_size": 11264, "moe_intermediate_size": 1408, "n_routed_experts": 64,
            "num_experts_per_tok": 6, "n_shared_experts": 2, "first_k_dense_replace": 1,
            "vocab_size": 163840, "tie_word_embeddings": false}}"#;
        let i = import(text, "k.json", None, None).unwrap();
        assert_eq!(i.model.quantization.default.to_string(), "fp8-block128");
        assert_eq!(i.model.config.q_lora_rank, None);
    }

    #[test]
    fn mixed_group_takes_the_majority_and_warns() {
        // Only layer 0's attention is ignored: 1 of 4 layers BF16.
        let q = r#", "quantization_config": {"quant_method": "fp8",
            "modules_to_not_convert": ["model.layers.0.self_attn"]}"#;
        let i = import(&llama(q), "l.json", None, None).unwrap();
        assert_eq!(i.model.quantization.default.to_string(), "fp8");
        assert!(
            i.warnings.iter().any(|w| w.starts_with("attention:")),
            "{:?}",
            i.warnings
        );
    }

    #[test]
    fn unknown_quant_method_and_missing_fields_are_errors() {
        let e = import(
            &llama(r#", "quantization_config": {"quant_method": "awq"}"#),
            "l.json",
            None,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("awq") && e.contains("quant_method"), "{e}");
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
