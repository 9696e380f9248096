//! The imported model as TOML text: what `rooftop import-hf` prints or saves, and what
//! `registry::load_model` reads back to the same [`ModelSpec`].
//!
//! Why it is apart: the text is a derived view of the spec. It is written by serializing
//! the spec's own structs (so a field added to [`ModelSpec`] is written without touching
//! this file), with two things a serializer does not know added around it: the header
//! comment, and the `[config]` keys that keep the source `config.json`'s names
//! (`num_experts`, `num_local_experts`, `experts_per_token`), which the model reader accepts
//! as aliases. Touches no files.

use super::config::Keys;
use crate::spec::model::{ModelConfig, ModelSpec, QuantSpec, VisionSpec};
use serde::Serialize;
use std::collections::BTreeMap;

/// The first lines of every imported description.
const HEADER: &str = "# Imported by `rooftop import-hf`; field names under [config] as in config.json.\n# Check [sources].notes for fields the import did not map.\n";

/// The description as written: [`ModelSpec`]'s fields, with `[config]` re-keyed.
#[derive(Serialize)]
struct Document<'a> {
    name: &'a str,
    full_name: &'a str,
    architecture: &'a str,
    config: Config<'a>,
    quantization: &'a QuantSpec,
    #[serde(skip_serializing_if = "Option::is_none")]
    vision: Option<&'a VisionSpec>,
    sources: &'a BTreeMap<String, String>,
}

/// `[config]`: the spec's fields, less the routed-expert count and top-k, which are written
/// under the names the source file gives them.
#[derive(Serialize)]
struct Config<'a> {
    #[serde(flatten)]
    fields: ModelConfig,
    #[serde(flatten)]
    renamed: BTreeMap<&'a str, u32>,
}

/// The model as TOML, `[config]` keys named as in the source `config.json`.
pub(super) fn render_toml(m: &ModelSpec, keys: &Keys) -> String {
    let c = &m.config;
    let renamed = [
        (keys.experts, c.n_routed_experts),
        (keys.top_k, c.num_experts_per_tok),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k, v?)))
    .collect();
    let doc = Document {
        name: &m.name,
        full_name: &m.full_name,
        architecture: &m.architecture,
        config: Config {
            fields: ModelConfig {
                n_routed_experts: None,
                num_experts_per_tok: None,
                ..c.clone()
            },
            renamed,
        },
        quantization: &m.quantization,
        vision: m.vision.as_ref(),
        sources: &m.sources,
    };
    let body = toml::to_string_pretty(&doc).expect("a model spec serializes to TOML");
    let body = match (c.first_k_dense_replace, &keys.first_k_note) {
        (Some(k), Some(note)) => {
            let line = format!("\nfirst_k_dense_replace = {k}\n");
            body.replacen(
                &line,
                &format!("\nfirst_k_dense_replace = {k}    # {note}\n"),
                1,
            )
        }
        _ => body,
    };
    // The one [config] field that is a length, not a count: say its unit.
    let body = match c.max_position_embeddings {
        Some(w) => {
            let line = format!("\nmax_position_embeddings = {w}\n");
            body.replacen(
                &line,
                &format!(
                    "\nmax_position_embeddings = {w}    # tokens: the context window (prompt + output)\n"
                ),
                1,
            )
        }
        None => body,
    };
    format!("{HEADER}{body}")
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::qwen3_moe;
    use super::super::import;
    use crate::spec::model::ModelSpec;
    use crate::spec::registry::parse_toml;

    #[test]
    fn toml_reads_back_to_the_same_spec() {
        let i = import(&qwen3_moe(""), "x/Qwen3-30B/config.json", None, None).unwrap();
        let back: ModelSpec = parse_toml(&i.toml, "t").unwrap();
        assert_eq!(back, i.model);
        assert_eq!(i.model.name, "qwen3-30b");
        assert!(i.toml.contains("num_experts = 128"), "{}", i.toml);
    }
}
