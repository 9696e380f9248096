//! Every built-in description loads and validates.
use rooftop::spec::registry::{builtin_names, load_gpu, load_interconnect, load_model, Kind};
use rooftop::spec::System;

#[test]
fn every_builtin_loads() {
    for n in builtin_names(Kind::Gpu) {
        load_gpu(n).unwrap_or_else(|e| panic!("{e}"));
    }
    for n in builtin_names(Kind::Interconnect) {
        load_interconnect(n).unwrap_or_else(|e| panic!("{e}"));
    }
    for n in builtin_names(Kind::System) {
        System::load(n).unwrap_or_else(|e| panic!("{e}"));
    }
    for n in builtin_names(Kind::Model) {
        load_model(n).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The engine and client examples in the README's "Descriptions (TOML)" section are valid
/// descriptions: each block is written to a file and loaded as a user's would be.
#[test]
fn readme_engine_and_client_examples_load() {
    let readme = include_str!("../README.md");
    let block = |header: &str| -> String {
        let start = readme
            .find(header)
            .unwrap_or_else(|| panic!("README has no block starting {header}"));
        let end = start + readme[start..].find("```").expect("block closes");
        readme[start..end].to_string()
    };
    let dir = std::env::temp_dir().join(format!("rooftop-readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let engine = dir.join("engine.toml");
    std::fs::write(&engine, block("# configs/engines/NAME.toml")).unwrap();
    System::load_with_engine("8x-h100-nvlink", Some(engine.to_str().unwrap()), &[])
        .unwrap_or_else(|e| panic!("README engine example: {e}"));
    let client = dir.join("client.toml");
    std::fs::write(&client, block("# configs/clients/NAME.toml")).unwrap();
    let c = rooftop::spec::registry::load_client(client.to_str().unwrap())
        .unwrap_or_else(|e| panic!("README client example: {e}"));
    assert_eq!(c.model().prompts_per_concurrency, Some(10));
    std::fs::remove_dir_all(&dir).ok();
}

/// Every built-in model states its context window, with a source: a sequence past it is
/// refused rather than priced, so a model without one would silently price any length.
#[test]
fn every_builtin_model_has_a_sourced_context_window() {
    for n in builtin_names(Kind::Model) {
        let m = load_model(n).unwrap_or_else(|e| panic!("{e}"));
        let w = m
            .config
            .max_position_embeddings
            .unwrap_or_else(|| panic!("{n}: no config.max_position_embeddings"));
        // Published windows run from 2k tokens (early Llama) to a few million.
        assert!((2048..=16_777_216).contains(&w), "{n}: {w}");
        assert!(
            m.sources.contains_key("max_position_embeddings"),
            "{n}: no [sources] max_position_embeddings"
        );
    }
}

/// A draft head's attention shape and draft vocabulary are checked like the model's own:
/// key/value heads that do not divide the query heads, a head width without its heads, and a
/// draft vocabulary larger than the target's are refused naming the field.
#[test]
fn impossible_draft_heads_are_refused_naming_the_field() {
    let base = rooftop::spec::registry::load_model("kimi-k2.5-int4").unwrap();
    for (edit, field) in [
        (
            (|h: &mut rooftop::spec::model::DraftHeadSpec| h.num_key_value_heads = Some(48))
                as fn(&mut rooftop::spec::model::DraftHeadSpec),
            "eagle_head.num_key_value_heads",
        ),
        (
            |h| {
                h.num_attention_heads = None;
                h.num_key_value_heads = None;
            },
            "eagle_head.num_attention_heads",
        ),
        (
            |h| h.draft_vocab_size = 200_000,
            "eagle_head.draft_vocab_size",
        ),
        (|h| h.head_dim = Some(0), "eagle_head.head_dim"),
    ] {
        let mut m = base.clone();
        edit(m.eagle_head.as_mut().unwrap());
        let (f, expected) = m.validate().expect_err(field);
        assert_eq!(f, field, "{expected}");
    }
}
