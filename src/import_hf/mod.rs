//! `rooftop import-hf`: a Hugging Face `config.json` (with its `quantization_config`, or a
//! separate ModelOpt `hf_quant_config.json`) turned into rooftop's model description.
//!
//! Why it exists: every model a user wants to try ships a `config.json`, and transcribing
//! forty fields by hand is where descriptions go wrong (a dense width taken for the expert
//! width, a quantized group taken for BF16). The import reads the fields rooftop's
//! [`ModelConfig`](crate::spec::model::ModelConfig) names (it uses the same names), derives
//! the storage format of each weight group from the quantization description, and writes
//! TOML that `registry::load_model` reads back to the same [`ModelSpec`].
//!
//! It touches no files: text in, spec + TOML + warnings out; the command and the registry do
//! the I/O. Nothing is dropped silently: a `config.json` field that is neither mapped nor in
//! [`IRRELEVANT`] is reported as a warning, and so is every approximation the import makes.
//!
//! This file is the flow; the parts are `config` (reading `config.json`), `quant`
//! (quantization schemes → a format per weight group) and `render` (the TOML text).

mod config;
mod layers;
mod quant;
mod render;

pub use config::{IRRELEVANT, SUPPORTED};

use crate::error::{Error, Result};
use crate::spec::model::ModelSpec;
use config::{Ctx, Obj};
use std::collections::BTreeMap;

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
    if let Some(n) = name.filter(|n| n.trim().is_empty() || n.chars().any(char::is_control)) {
        return Err(Error::Usage(format!(
            "--name {n:?}: expected a model name (not empty, no control characters)"
        )));
    }
    let root = config::parse_json(config_text, config_label)?;
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
    let (arch, family) = config::read_architecture(&cx, &mut top, &mut warnings)?;
    cx.arch = arch.clone();

    // Vision-language wrappers keep the language model under `text_config`.
    let mut t = match config::language_model(&cx, &mut top, &mut warnings)? {
        Some(m) => {
            let mut t = Obj::new(m, "text_config.");
            // The inner language model's class (e.g. DeepseekV3ForCausalLM): read as `arch`'s.
            t.get("architectures");
            t
        }
        None => Obj::new(root, ""),
    };
    let (config, keys, layout) = config::read_config(&cx, family, &mut t, &mut top, &mut warnings)?;
    let mut storage =
        quant::read_quantization(&cx, &mut t, &mut top, quant_text, &layout, &mut warnings)?;
    quant::expert_dtype(&cx, &mut t, &mut storage, &mut warnings)?;
    let vision = match top.get("vision_config") {
        Some(v) if !v.is_null() => {
            let spec = layers::read_vision(v, config.hidden_size);
            if spec.is_none() {
                warnings.push(
                    "vision_config: its sizes (depth, hidden_size, intermediate_size, heads, patch_size) are incomplete; the vision encoder is not modelled: predictions and weight memory cover the language model only"
                        .into(),
                );
            }
            spec
        }
        _ => None,
    };
    config::report_leftovers(&mut t, &top, &mut warnings);

    let model = ModelSpec {
        name: name
            .map(str::to_string)
            .unwrap_or_else(|| default_name(config_label)),
        full_name: format!("{arch} imported from {config_label}"),
        sources: sources(config_label, &arch, &storage, &warnings),
        architecture: arch,
        published_total_params: None,
        published_active_params: None,
        config,
        quantization: storage.spec,
        routing: Default::default(),
        eagle_head: None,
        vision,
    };
    model.validate().map_err(|(f, e)| {
        cx.invalid(&format!("{}{}", t.path, f.trim_start_matches("config.")), e)
    })?;
    let toml = render::render_toml(&model, &keys);
    Ok(Imported {
        model,
        warnings,
        toml,
    })
}

/// `[sources]`: what was imported, where the formats came from, and the warnings.
fn sources(
    config_label: &str,
    arch: &str,
    storage: &quant::Storage,
    warnings: &[String],
) -> BTreeMap<String, String> {
    let also = storage
        .separate
        .map(|q| format!(" and {q}"))
        .unwrap_or_default();
    let notes = if warnings.is_empty() {
        "no warnings: every config.json field was mapped or is known not to change the decode cost"
            .into()
    } else {
        warnings.join("; ")
    };
    BTreeMap::from([
        (
            "imported".to_string(),
            format!("rooftop import-hf from {config_label}{also} (architecture {arch})"),
        ),
        ("quantization".to_string(), storage.described.clone()),
        ("notes".to_string(), notes),
    ])
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

/// `config.json` texts the unit tests of this module's parts start from.
#[cfg(test)]
mod fixtures {
    pub fn llama(extra: &str) -> String {
        format!(
            r#"{{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 4,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 128256, "tie_word_embeddings": false, "rope_theta": 500000.0,
            "max_position_embeddings": 131072{extra}}}"#
        )
    }

    pub fn qwen3_moe(extra: &str) -> String {
        format!(
            r#"{{"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 6,
            "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
            "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
            "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": false,
            "max_position_embeddings": 40960{extra}}}"#
        )
    }
}
