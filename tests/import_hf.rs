//! `rooftop import-hf` turns each built-in model's Hugging Face config.json (fixtures under
//! tests/fixtures/hf/, written from the published values) into a description whose
//! predictions equal the built-in's, and says clearly what it cannot read.

use assert_cmd::Command;
use predicates::prelude::*;
use rooftop::cost::Parallel;
use rooftop::import_hf::{import, Imported};
use rooftop::predict::{predict, Scenario};
use rooftop::spec::registry::{load_model, parse_toml, read_hf};
use rooftop::spec::{ModelSpec, System};
use std::path::{Path, PathBuf};

/// Fixture folder → the built-in model it describes.
const FIXTURES: &[&str] = &[
    "kimi-k2.5-int4",
    "deepseek-v3-fp8",
    "glm-5-nvfp4",
    "glm-4.5-fp8",
    "qwen3-235b-a22b-fp8",
    "qwen3-30b-a3b",
    "llama-3.1-70b",
    "llama-3.1-70b-fp8",
    "llama-3.1-8b",
    "mixtral-8x7b",
    "gpt-oss-120b",
];

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hf")
        .join(name)
}

fn fixture_config(name: &str) -> String {
    fixture_dir(name).join("config.json").display().to_string()
}

fn import_fixture(name: &str) -> Imported {
    read_hf(&fixture_dir(name).join("config.json"), None, Some(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The largest TP that divides the GPUs, the heads and the KV heads (as tests/physics.rs).
fn layout(m: &ModelSpec, s: &System) -> Parallel {
    let mut tp = s.spec.gpu_count;
    while tp > 0 {
        let p = Parallel::tp(tp);
        if p.validate(m, s).is_ok() {
            return p;
        }
        tp /= 2;
    }
    panic!("no TP layout for {} on {}", m.name, s.spec.name)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn every_fixture_predicts_what_its_builtin_predicts() {
    let systems = [
        System::load("8x-h200-nvlink").unwrap(),
        System::load("8x-rtx-pro-6000-pcie").unwrap(),
    ];
    for name in FIXTURES {
        let imported = import_fixture(name).model;
        let builtin = load_model(name).unwrap();
        assert_eq!(imported.name, builtin.name);
        assert_eq!(imported.architecture, builtin.architecture, "{name}");
        assert_eq!(
            imported.kv_bytes_per_token(),
            builtin.kv_bytes_per_token(),
            "{name}"
        );
        for sys in &systems {
            let p = layout(&builtin, sys);
            let a = Scenario::new(&imported, sys, p).unwrap();
            let b = Scenario::new(&builtin, sys, p).unwrap();
            for batch in [1, 64] {
                for context in [1024, 8192] {
                    let x = predict(&a, batch, context).unwrap();
                    let y = predict(&b, batch, context).unwrap();
                    let what = format!("{name} on {} {p} b={batch} c={context}", sys.spec.name);
                    assert!(
                        close(x.tpot_ms, y.tpot_ms),
                        "{what}: tpot {} vs {}",
                        x.tpot_ms,
                        y.tpot_ms
                    );
                    assert!(
                        close(x.sol_tpot_ms, y.sol_tpot_ms),
                        "{what}: sol {} vs {}",
                        x.sol_tpot_ms,
                        y.sol_tpot_ms
                    );
                    assert!(
                        close(x.memory.weights_per_gpu_gb, y.memory.weights_per_gpu_gb),
                        "{what}: weights {} vs {}",
                        x.memory.weights_per_gpu_gb,
                        y.memory.weights_per_gpu_gb
                    );
                }
            }
        }
    }
}

#[test]
fn every_fixture_resolves_the_builtins_weight_formats() {
    for name in FIXTURES {
        let i = import_fixture(name).model.quantization;
        let b = load_model(name).unwrap().quantization;
        let m = load_model(name).unwrap();
        assert_eq!(i.attention(), b.attention(), "{name} attention");
        if m.dense_layers() > 0 {
            assert_eq!(i.dense_mlp(), b.dense_mlp(), "{name} dense MLP");
        }
        if let Some(moe) = m.moe() {
            assert_eq!(i.routed_experts(), b.routed_experts(), "{name} routed");
            if moe.shared > 0 {
                assert_eq!(i.shared_experts(), b.shared_experts(), "{name} shared");
            }
        }
        assert_eq!(i.lm_head(), b.lm_head(), "{name} lm_head");
        assert_eq!(i.embedding(), b.embedding(), "{name} embedding");
        assert_eq!(i.kv_cache, b.kv_cache, "{name} kv");
    }
}

#[test]
fn the_toml_reads_back_to_the_imported_spec() {
    for name in FIXTURES {
        let i = import_fixture(name);
        let back: ModelSpec = parse_toml(&i.toml, name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, i.model, "{name}");
        back.validate().unwrap();
        assert!(
            i.model.sources["imported"].contains("config.json"),
            "{name}: {:?}",
            i.model.sources
        );
        assert!(i.model.published_total_params.is_none());
    }
}

#[test]
fn realistic_fixtures_raise_only_the_expected_warnings() {
    for name in FIXTURES {
        let w = import_fixture(name).warnings;
        if *name == "kimi-k2.5-int4" {
            assert_eq!(w.len(), 1, "{w:?}");
            assert!(w[0].starts_with("vision_config"), "{w:?}");
        } else {
            assert!(w.is_empty(), "{name}: {w:?}");
        }
    }
}

#[test]
fn an_unsupported_architecture_is_named_with_the_supported_ones() {
    let text = r#"{"architectures": ["FalconForCausalLM"], "hidden_size": 4544}"#;
    let e = import(text, "falcon/config.json", None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("FalconForCausalLM"), "{e}");
    assert!(e.contains("falcon/config.json"), "{e}");
    for a in [
        "DeepseekV3ForCausalLM",
        "LlamaForCausalLM",
        "GptOssForCausalLM",
    ] {
        assert!(e.contains(a), "{e}");
    }
}

#[test]
fn a_missing_field_names_the_field_and_the_file() {
    let path = fixture_config("llama-3.1-8b");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("hidden_size");
    let e = import(&v.to_string(), "llama/config.json", None, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("hidden_size") && e.contains("llama/config.json"),
        "{e}"
    );

    // Nested: the field's path inside text_config.
    let path = fixture_config("kimi-k2.5-int4");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["text_config"]
        .as_object_mut()
        .unwrap()
        .remove("hidden_size");
    let e = import(&v.to_string(), "kimi/config.json", None, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("text_config.hidden_size") && e.contains("kimi/config.json"),
        "{e}"
    );
}

#[test]
fn an_unknown_field_is_reported_not_dropped() {
    let path = fixture_config("deepseek-v3-fp8");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["num_dense_interleave"] = serde_json::json!(4);
    let i = import(&v.to_string(), "ds/config.json", None, None).unwrap();
    assert_eq!(i.warnings.len(), 1, "{:?}", i.warnings);
    assert!(i.warnings[0].contains("num_dense_interleave"));
    assert!(i.model.sources["notes"].contains("num_dense_interleave"));
}

#[test]
fn an_unknown_quant_method_is_an_error_naming_it() {
    let path = fixture_config("llama-3.1-8b");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["quantization_config"] = serde_json::json!({"quant_method": "hqq", "nbits": 4});
    let e = import(&v.to_string(), "l/config.json", None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("hqq") && e.contains("quant_method"), "{e}");
}

#[test]
fn glm5_without_its_hf_quant_config_is_bf16() {
    let text = std::fs::read_to_string(fixture_config("glm-5-nvfp4")).unwrap();
    let i = import(&text, "glm-5/config.json", None, None).unwrap();
    assert_eq!(i.model.quantization.default.to_string(), "bf16");
    let q =
        std::fs::read_to_string(fixture_dir("glm-5-nvfp4").join("hf_quant_config.json")).unwrap();
    let i = import(
        &text,
        "glm-5/config.json",
        Some((&q, "glm-5/hf_quant_config.json")),
        None,
    )
    .unwrap();
    assert_eq!(i.model.quantization.default.to_string(), "nvfp4");
    assert_eq!(i.model.quantization.attention().to_string(), "bf16");
    assert_eq!(i.model.name, "glm-5");
}

fn rooftop() -> Command {
    Command::cargo_bin("rooftop").unwrap()
}

fn predict_json(model: &str) -> serde_json::Value {
    let out = rooftop()
        .args([
            "predict",
            "--model",
            model,
            "--system",
            "8x-rtx-pro-6000-pcie",
            "--batch",
            "8",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn cli_import_then_predict_equals_the_builtin() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kimi.toml");
    rooftop()
        .args([
            "import-hf",
            &fixture_config("kimi-k2.5-int4"),
            "--name",
            "kimi-k2.5-int4",
            "--out",
            out.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("warning: vision_config"));
    let imported = predict_json(out.to_str().unwrap());
    let builtin = predict_json("kimi-k2.5-int4");
    assert_eq!(imported, builtin);
}

#[test]
fn cli_import_writes_toml_to_stdout_and_finds_the_sibling_quant_config() {
    rooftop()
        .args(["import-hf", &fixture_config("glm-5-nvfp4")])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("name = \"glm-5-nvfp4\"")
                .and(predicate::str::contains("default = \"nvfp4\""))
                .and(predicate::str::contains("attention = \"bf16\""))
                .and(predicate::str::contains("hf_quant_config.json")),
        );
}

#[test]
fn predict_accepts_a_config_json_as_the_model() {
    let v = predict_json(&fixture_config("kimi-k2.5-int4"));
    let b = predict_json("kimi-k2.5-int4");
    assert_eq!(v["model"], "kimi-k2.5-int4");
    assert_eq!(v["tpot_ms"], b["tpot_ms"]);
    assert_eq!(v["memory"], b["memory"]);
    // The sibling hf_quant_config.json is read as well.
    let g = predict_json(&fixture_config("glm-5-nvfp4"));
    assert_eq!(g["tpot_ms"], predict_json("glm-5-nvfp4")["tpot_ms"]);
}

/// A checkpoint folder stands for its config.json (and the hf_quant_config.json beside it),
/// in import-hf and as `--model`; a folder without one is refused by name.
#[test]
fn a_checkpoint_folder_is_read_as_its_config_json() {
    for name in ["kimi-k2.5-int4", "glm-5-nvfp4"] {
        let stdout = |p: &str| {
            rooftop()
                .args(["import-hf", p])
                .assert()
                .success()
                .get_output()
                .stdout
                .clone()
        };
        let folder = fixture_dir(name).display().to_string();
        let from_folder = String::from_utf8(stdout(&folder)).unwrap();
        let from_file = String::from_utf8(stdout(&fixture_config(name))).unwrap();
        // The same TOML but for the path the sources quote.
        let strip = |t: &str| {
            t.lines()
                .filter(|l| !l.contains("config.json"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(&from_folder), strip(&from_file), "{name}");
        assert!(
            from_folder.contains(&format!("name = \"{name}\"")),
            "{name}"
        );
        assert_eq!(
            predict_json(&folder)["tpot_ms"],
            predict_json(name)["tpot_ms"],
            "{name}"
        );
    }
    let empty = tempfile::tempdir().unwrap();
    rooftop()
        .args(["import-hf", empty.path().to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "is a directory (folder) with no config.json in it",
        ));
}

#[test]
fn cli_import_of_an_unsupported_model_fails_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("config.json");
    std::fs::write(&p, r#"{"architectures": ["MambaForCausalLM"]}"#).unwrap();
    rooftop()
        .args(["import-hf", p.to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("MambaForCausalLM"));
}

/// The corpus copy of a published config.json.
fn corpus_config(folder: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hf-configs")
        .join(folder)
        .join("config.json")
}

/// Nemotron-3 Super is LatentMoE: its 512 experts per MoE layer work on a 1,024-wide latent
/// (moe_latent_size), not the 4,096-wide hidden state. Read as hidden-wide experts it
/// counted 458.6 B total / 27.0 B active against the 120 B / 12 B of its name.
#[test]
fn nemotron_3_super_counts_its_latent_experts() {
    use rooftop::cost::memory::count_params;
    let i = read_hf(
        &corpus_config("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"),
        None,
        None,
    )
    .unwrap();
    assert_eq!(i.model.config.moe_latent_size, Some(1024));
    assert!(
        !i.warnings.iter().any(|w| w.contains("moe_latent_size")),
        "{:?}",
        i.warnings
    );
    let p = count_params(&i.model);
    assert!(
        (p.total / 1e9 - 120.0).abs() < 2.4,
        "total {}",
        p.total / 1e9
    );
    // NVIDIA's 12 B leaves out the 0.54 B input embedding a token reads one row of.
    let active = (p.active - p.embedding) / 1e9;
    assert!((active - 12.0).abs() < 0.5, "active {active}");
    // The TOML carries the latent width and reads back to the same spec.
    assert!(i.toml.contains("moe_latent_size = 1024"), "{}", i.toml);
    assert_eq!(parse_toml::<ModelSpec>(&i.toml, "t").unwrap(), i.model);
}

/// transformers 5 writes Nemotron-H's pattern as `layers_block_type` and may leave
/// `num_hidden_layers` out; the layer count and the MoE layers come from the list.
#[test]
fn nemotron_h_layers_block_type_and_a_missing_layer_count() {
    let text =
        std::fs::read_to_string(corpus_config("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"))
            .unwrap();
    let base = import(&text, "nano.json", None, None).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let pattern = v["hybrid_override_pattern"].as_str().unwrap().to_string();
    let names: Vec<&str> = pattern
        .chars()
        .map(|c| match c {
            'M' => "mamba",
            '*' => "attention",
            'E' => "moe",
            _ => "mlp",
        })
        .collect();
    let o = v.as_object_mut().unwrap();
    o.remove("hybrid_override_pattern");
    o.insert("num_hidden_layers".into(), serde_json::Value::Null);
    o.insert("layers_block_type".into(), serde_json::json!(names));
    let listed = import(&v.to_string(), "nano.json", None, None).unwrap();
    assert_eq!(listed.model.config, base.model.config);
    assert!(
        listed
            .warnings
            .iter()
            .any(|w| w.contains("num_hidden_layers is absent: 52 layers")),
        "{:?}",
        listed.warnings
    );
    // A list that disagrees with the pattern is an error naming both fields.
    let mut both = v.clone();
    both["hybrid_override_pattern"] = serde_json::json!(pattern.replacen('E', "-", 1));
    let e = import(&both.to_string(), "nano.json", None, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nano.json")
            && e.contains("layers_block_type")
            && e.contains("hybrid_override_pattern"),
        "{e}"
    );
    // MoE layers without an expert count: refused, naming n_routed_experts.
    let mut no_experts = v.clone();
    no_experts
        .as_object_mut()
        .unwrap()
        .remove("n_routed_experts");
    let e = import(&no_experts.to_string(), "nano.json", None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("n_routed_experts"), "{e}");
    // A dense Nemotron-H (no E in its pattern) needs none.
    let mut dense = v;
    let o = dense.as_object_mut().unwrap();
    o.remove("n_routed_experts");
    o.insert(
        "layers_block_type".into(),
        serde_json::json!(names
            .iter()
            .map(|n| if *n == "moe" { "mlp" } else { n })
            .collect::<Vec<_>>()),
    );
    let d = import(&dense.to_string(), "dense.json", None, None).unwrap();
    assert!(d.model.moe().is_none());
    assert_eq!(
        d.model.dense_layers(),
        names.iter().filter(|n| **n == "moe").count() as u32
    );
}

/// ModelOpt MIXED_PRECISION (the Nemotron-3 Super, DeepSeek-V4 and Qwen3.6 NVFP4 releases):
/// each module's format comes from `quantized_layers`; a module not listed is BF16, and a
/// key may name a fused parent (`mlp.experts`).
#[test]
fn modelopt_mixed_precision_reads_each_layers_format() {
    use rooftop::spec::FormatKind;
    let text = std::fs::read_to_string(corpus_config(
        "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
    ))
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let pattern = v["hybrid_override_pattern"].as_str().unwrap();
    // As the release writes it: every routed expert NVFP4, the shared experts and most
    // Mamba projections FP8, attention and the latent projections mostly BF16.
    let mut layers = serde_json::Map::new();
    for (l, c) in pattern.chars().enumerate() {
        let p = format!("backbone.layers.{l}.mixer");
        match c {
            'E' => {
                for e in 0..512 {
                    for m in ["up_proj", "down_proj"] {
                        layers.insert(
                            format!("{p}.experts.{e}.{m}"),
                            serde_json::json!({"quant_algo": "NVFP4", "group_size": 16}),
                        );
                    }
                }
                for m in ["up_proj", "down_proj"] {
                    layers.insert(
                        format!("{p}.shared_experts.{m}"),
                        serde_json::json!({"quant_algo": "FP8"}),
                    );
                }
            }
            'M' => {
                layers.insert(
                    format!("{p}.in_proj"),
                    serde_json::json!({"quant_algo": "FP8"}),
                );
                layers.insert(
                    format!("{p}.out_proj"),
                    serde_json::json!({"quant_algo": "FP8"}),
                );
            }
            _ => {}
        }
    }
    let hf_quant = serde_json::json!({
        "producer": {"name": "modelopt", "version": "0.43.0"},
        "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8",
                         "quantized_layers": layers}
    })
    .to_string();
    let i = import(
        &text,
        "super.json",
        Some((&hf_quant, "hf_quant_config.json")),
        None,
    )
    .unwrap();
    let q = &i.model.quantization;
    assert_eq!(q.routed_experts().kind, FormatKind::Nvfp4);
    // Mamba projections (FP8, 80 modules) outnumber the attention ones (BF16, 32): the
    // group takes the majority and says so.
    assert_eq!(q.attention().kind, FormatKind::Fp8, "{:?}", i.warnings);
    assert!(
        i.warnings
            .iter()
            .any(|w| w
                .starts_with("attention: its Linear layers are stored in more than one format")),
        "{:?}",
        i.warnings
    );
    assert_eq!(q.kv_cache, rooftop::spec::KvDtype::Fp8);
    assert!(i.model.sources["quantization"].contains("MIXED_PRECISION"));
    // Unlisted fused experts by parent name; an unknown per-layer algorithm names its module.
    let qwen = serde_json::json!({"quantization": {"quant_algo": "MIXED_PRECISION",
        "quantized_layers": {"model.layers.0.mlp.experts": {"quant_algo": "W4A16_NVFP4"},
                             "model.layers.0.self_attn.q_proj": {"quant_algo": "FROB8"}}}})
    .to_string();
    let e = import(
        &std::fs::read_to_string(fixture_config("qwen3-30b-a3b")).unwrap(),
        "q.json",
        Some((&qwen, "hf_quant_config.json")),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("hf_quant_config.json") && e.contains("FROB8") && e.contains("q_proj"),
        "{e}"
    );
    let missing = r#"{"quantization": {"quant_algo": "MIXED_PRECISION"}}"#;
    let e = import(
        &text,
        "super.json",
        Some((missing, "hf_quant_config.json")),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("quantized_layers"), "{e}");
}

/// The context window is read from config.json, is the one the built-in states, and is
/// written with its unit.
#[test]
fn the_context_window_is_imported() {
    for name in FIXTURES {
        let i = import_fixture(name);
        let builtin = load_model(name).unwrap();
        assert!(i.model.config.max_position_embeddings.is_some(), "{name}");
        assert_eq!(
            i.model.config.max_position_embeddings, builtin.config.max_position_embeddings,
            "{name}"
        );
        assert!(
            i.toml.contains("max_position_embeddings = ")
                && i.toml.contains("# tokens: the context window"),
            "{name}: {}",
            i.toml
        );
    }
}

/// What a config leaves unsaid is either refused or said: an activation transformers does
/// not know is refused with its field (it would count the MLP's matrices by guess); an empty
/// `--name` is a usage error; a missing window or K/V head count is a warning that says what
/// was assumed.
#[test]
fn unknown_activations_empty_names_and_missing_fields_are_refused_or_said() {
    let llama = std::fs::read_to_string(fixture_config("llama-3.1-8b")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&llama).unwrap();
    v["hidden_act"] = "swiglu_v2".into();
    let e = import(&v.to_string(), "l.json", None, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("l.json") && e.contains("hidden_act") && e.contains("swiglu_v2"),
        "{e}"
    );
    v["hidden_act"] = "silu".into();
    for bad in ["", "  ", "a\nb"] {
        let e = import(&v.to_string(), "l.json", None, Some(bad)).unwrap_err();
        assert!(matches!(e, rooftop::error::Error::Usage(_)), "{bad:?}: {e}");
        assert!(e.to_string().contains("--name"), "{e}");
    }
    let o = v.as_object_mut().unwrap();
    o.remove("max_position_embeddings");
    o.remove("num_key_value_heads");
    let i = import(&v.to_string(), "l.json", None, None).unwrap();
    assert!(
        i.warnings
            .iter()
            .any(|w| w.contains("max_position_embeddings")),
        "{:?}",
        i.warnings
    );
    assert!(
        i.warnings
            .iter()
            .any(|w| w.contains("num_key_value_heads") && w.contains("multi-head")),
        "{:?}",
        i.warnings
    );
    assert_eq!(i.model.config.num_key_value_heads, None);
    // Every published config in the fixtures names a known activation and a window.
    for name in FIXTURES {
        let i = import_fixture(name);
        assert!(
            !i.warnings
                .iter()
                .any(|w| w.contains("max_position_embeddings")),
            "{name}: {:?}",
            i.warnings
        );
    }
}

/// A config whose MLA head parts or shared experts overflow 32-bit arithmetic is refused,
/// naming the field, where it panicked ("attempt to add with overflow", found by the reader
/// fuzzer on a DeepSeek-V3 config edited to qk_rope_head_dim = 4294967295).
#[test]
fn dimensions_past_their_plausible_range_are_refused_not_overflowed() {
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture_config("deepseek-v3-fp8")).unwrap())
            .unwrap();
    for (field, value) in [
        ("qk_rope_head_dim", u32::MAX as u64),
        ("n_shared_experts", u32::MAX as u64),
        ("kv_lora_rank", 1 << 30),
    ] {
        let mut cfg = base.clone();
        cfg[field] = serde_json::json!(value);
        if field == "qk_rope_head_dim" {
            cfg["qk_head_dim"] = serde_json::json!(192);
        }
        let text = cfg.to_string();
        let err = match import(&text, "edited/config.json", None, Some("edited")) {
            Ok(_) => panic!("{field} = {value} was imported"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(field), "{field}: {err}");
    }
}
