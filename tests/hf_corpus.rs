//! The real-config corpus (`tests/data/hf-configs`, a copy of `shared/hf-configs`: one folder
//! per published checkpoint, with
//! ModelOpt's `hf_quant_config.json` where the publisher ships one): every config imports,
//! predicts a decode step on 8x B200 at batch 1, and its parameter count matches the size
//! its publisher states, in the name or the model card.
//!
//! The repository's copy is always checked; `../shared/hf-configs`, which may hold configs
//! added since, is checked as well where it sits beside the checkout (a line on stderr says
//! when it does not).

use rooftop::cost::memory::count_params;
use rooftop::cost::Parallel;
use rooftop::predict::{predict, Scenario};
use rooftop::spec::registry::read_hf;
use rooftop::spec::{ModelSpec, System};
use std::path::PathBuf;

mod common;

/// The corpus folders to check: the repository's copy, then the shared one when present.
fn corpora() -> Vec<PathBuf> {
    common::data_and_shared("hf-configs", "hf-configs")
}

fn folders(d: &PathBuf) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("config.json").is_file())
        .collect();
    v.sort();
    v
}

fn import(dir: &std::path::Path) -> ModelSpec {
    read_hf(&dir.join("config.json"), None, None)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .model
}

/// The largest TP that divides the GPUs and that the model's heads allow.
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

#[test]
fn every_corpus_config_imports_and_predicts_on_8x_b200() {
    for d in corpora() {
        let sys = System::load("8x-b200-nvlink").unwrap();
        let dirs = folders(&d);
        assert!(dirs.len() >= 36, "corpus has {} configs", dirs.len());
        for dir in &dirs {
            let m = import(dir);
            let sc = Scenario::new(&m, &sys, layout(&m, &sys)).unwrap();
            let p = predict(&sc, 1, 1024).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            assert!(
                p.tpot_ms.is_finite() && p.tpot_ms > 0.0,
                "{}",
                dir.display()
            );
            assert!(p.sol_tpot_ms <= p.tpot_ms, "{}", dir.display());
            let sum: f64 = p.breakdown_ms.values().sum();
            assert!(
                (sum - p.tpot_ms).abs() <= 1e-9 * p.tpot_ms,
                "{}",
                dir.display()
            );
            assert!(p.memory.kv_bytes_per_token_per_gpu >= 0.0);
            assert!(p.model_params.total > p.model_params.active * 0.999);
        }
    }
}

/// What `import-hf` writes is what it predicts with: every corpus config's TOML reads back
/// (through the same strict reader as `--model FILE`) to the very model it imported. Gemma-4's
/// was written with its config.json's `top_k_experts`, a key the reader refused, so the saved
/// file could not be used.
#[test]
fn every_imported_toml_reads_back_to_the_model_it_describes() {
    for d in corpora() {
        for dir in folders(&d) {
            let imported = read_hf(&dir.join("config.json"), None, None)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let back: ModelSpec =
                rooftop::spec::registry::parse_toml(&imported.toml, "imported.toml")
                    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            assert_eq!(back, imported.model, "{}", dir.display());
        }
    }
}

/// A size as publishers write it ("397B", "31.6B", "1.03T") and the tolerance it allows:
/// 2 %, or half a unit of its last digit when that is wider (a name's "A3B" stands for
/// anything that rounds to 3 B, e.g. Qwen3-30B-A3B's 3.3 B).
fn stated(s: &str) -> (f64, f64) {
    let (num, unit) = s.split_at(s.len() - 1);
    let scale = match unit {
        "B" => 1e9,
        "T" => 1e12,
        _ => panic!("size {s}"),
    };
    let v: f64 = num.parse().unwrap();
    let decimals = num.split('.').nth(1).map_or(0, str::len) as i32;
    let half_unit = 0.5 * 10f64.powi(-decimals) * scale;
    (v * scale, (0.02 * v * scale).max(half_unit))
}

/// How the publisher counts: the total with or without the vision tower, the active count
/// with or without the input embedding (a token reads one row of it; OpenAI and DeepSeek
/// leave it out, Qwen and Meta count it).
#[derive(Clone, Copy)]
enum Count {
    Text,
    WithVision,
}

#[derive(Clone, Copy)]
enum Active {
    WithEmbedding,
    WithoutEmbedding,
}

/// (corpus folder, stated total, how, stated active, how, where it is stated).
type Stated = (
    &'static str,
    &'static str,
    Count,
    Option<&'static str>,
    Active,
    &'static str,
);

const STATED: &[Stated] = &[
    (
        "Qwen--Qwen3.5-397B-A17B",
        "397B",
        Count::WithVision,
        Some("17B"),
        Active::WithEmbedding,
        "name",
    ),
    (
        "nvidia--Qwen3.5-397B-A17B-NVFP4",
        "397B",
        Count::WithVision,
        Some("17B"),
        Active::WithEmbedding,
        "name",
    ),
    (
        "Qwen--Qwen3.5-35B-A3B",
        "35B",
        Count::WithVision,
        Some("3B"),
        Active::WithEmbedding,
        "name",
    ),
    (
        "Qwen--Qwen3.5-27B",
        "27B",
        Count::WithVision,
        None,
        Active::WithEmbedding,
        "name",
    ),
    (
        "Qwen--Qwen3-235B-A22B",
        "235B",
        Count::Text,
        Some("22B"),
        Active::WithEmbedding,
        "name",
    ),
    (
        "Qwen--Qwen3-235B-A22B-FP8",
        "235B",
        Count::Text,
        Some("22B"),
        Active::WithEmbedding,
        "name",
    ),
    (
        "nvidia--Qwen3-235B-A22B-NVFP4",
        "235B",
        Count::Text,
        Some("22B"),
        Active::WithEmbedding,
        "name",
    ),
    (
        "Qwen--Qwen3-30B-A3B",
        "30.5B",
        Count::Text,
        Some("3.3B"),
        Active::WithEmbedding,
        "card",
    ),
    (
        "Qwen--Qwen3-32B",
        "32.8B",
        Count::Text,
        None,
        Active::WithEmbedding,
        "card",
    ),
    (
        "Qwen--Qwen3-32B-FP8",
        "32.8B",
        Count::Text,
        None,
        Active::WithEmbedding,
        "card",
    ),
    (
        "Qwen--Qwen3-8B",
        "8.2B",
        Count::Text,
        None,
        Active::WithEmbedding,
        "card",
    ),
    (
        "meta-llama--Meta-Llama-3.1-8B",
        "8B",
        Count::Text,
        None,
        Active::WithEmbedding,
        "name",
    ),
    (
        "meta-llama--Meta-Llama-3.1-70B",
        "70B",
        Count::Text,
        None,
        Active::WithEmbedding,
        "name",
    ),
    (
        "nvidia--Llama-3.1-70B-Instruct-FP8",
        "70B",
        Count::Text,
        None,
        Active::WithEmbedding,
        "name",
    ),
    (
        "meta-llama--Llama-4-Scout-17B-16E-Instruct",
        "109B",
        Count::Text,
        Some("17B"),
        Active::WithEmbedding,
        "card; name 17B active",
    ),
    (
        "mistralai--Mixtral-8x7B-v0.1",
        "46.7B",
        Count::Text,
        Some("12.9B"),
        Active::WithEmbedding,
        "card",
    ),
    (
        "deepseek-ai--DeepSeek-V3",
        "671B",
        Count::Text,
        Some("37B"),
        Active::WithoutEmbedding,
        "card",
    ),
    (
        "deepseek-ai--DeepSeek-R1",
        "671B",
        Count::Text,
        Some("37B"),
        Active::WithoutEmbedding,
        "card",
    ),
    (
        "nvidia--DeepSeek-V3.1-NVFP4",
        "671B",
        Count::Text,
        Some("37B"),
        Active::WithoutEmbedding,
        "card",
    ),
    (
        "deepseek-ai--DeepSeek-V3.2",
        "671B",
        Count::Text,
        Some("37B"),
        Active::WithoutEmbedding,
        "card (685B with the 14B MTP module)",
    ),
    (
        "deepseek-ai--DeepSeek-V4-Flash",
        "284B",
        Count::Text,
        Some("13B"),
        Active::WithoutEmbedding,
        "card (284B parameters, 13B activated)",
    ),
    (
        "moonshotai--Kimi-K2.5",
        "1.03T",
        Count::Text,
        Some("32B"),
        Active::WithoutEmbedding,
        "card; reference/models.md",
    ),
    (
        "nvidia--Kimi-K2.5-NVFP4",
        "1.03T",
        Count::Text,
        Some("32B"),
        Active::WithoutEmbedding,
        "card; reference/models.md",
    ),
    (
        "zai-org--GLM-5",
        "744B",
        Count::Text,
        None,
        Active::WithoutEmbedding,
        "card; reference/models.md",
    ),
    (
        "zai-org--GLM-5-FP8",
        "744B",
        Count::Text,
        None,
        Active::WithoutEmbedding,
        "card",
    ),
    (
        "nvidia--GLM-5-NVFP4",
        "744B",
        Count::Text,
        None,
        Active::WithoutEmbedding,
        "card",
    ),
    (
        "openai--gpt-oss-120b",
        "116.8B",
        Count::Text,
        Some("5.1B"),
        Active::WithoutEmbedding,
        "card; reference/models.md",
    ),
    (
        "MiniMaxAI--MiniMax-M2.5",
        "229B",
        Count::Text,
        Some("10B"),
        Active::WithoutEmbedding,
        "card",
    ),
    (
        "nvidia--MiniMax-M2.5-NVFP4",
        "229B",
        Count::Text,
        Some("10B"),
        Active::WithoutEmbedding,
        "card",
    ),
    (
        "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        "31.6B",
        Count::Text,
        Some("3.6B"),
        Active::WithEmbedding,
        "card (name 30B-A3B)",
    ),
    (
        "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4",
        "31.6B",
        Count::Text,
        Some("3.6B"),
        Active::WithEmbedding,
        "card (name 30B-A3B)",
    ),
    (
        "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
        "120B",
        Count::Text,
        Some("12B"),
        Active::WithoutEmbedding,
        "name and card (120B total, 12B active); with its 0.54B input embedding the active count is 12.8B",
    ),
    (
        "google--gemma-4-26B-A4B",
        "26B",
        Count::WithVision,
        Some("4B"),
        Active::WithEmbedding,
        "name",
    ),
];

#[test]
fn parameter_counts_match_publisher_stated_sizes() {
    let repo = common::data("hf-configs");
    for d in corpora() {
        // The repository's copy holds every stated folder; the shared one may differ.
        let repo_copy = d == repo;
        let mut failures = Vec::new();
        for (folder, total, how, active, how_active, source) in STATED {
            let dir = d.join(folder);
            assert!(
                dir.is_dir() || !repo_copy,
                "the repository's corpus lacks {folder}"
            );
            if !dir.is_dir() {
                continue; // the held-out set may differ; only present folders are checked
            }
            let m = import(&dir);
            let p = count_params(&m);
            let computed = match how {
                Count::Text => p.total,
                Count::WithVision => p.total + p.vision,
            };
            let (want, tol) = stated(total);
            let line = format!(
                "{folder}: total {:.2}B vs stated {total} ({source})",
                computed / 1e9
            );
            if (computed - want).abs() > tol {
                failures.push(line);
            }
            if let Some(a) = active {
                let computed = match how_active {
                    Active::WithEmbedding => p.active,
                    Active::WithoutEmbedding => p.active - p.embedding,
                };
                let (want, tol) = stated(a);
                if (computed - want).abs() > tol {
                    failures.push(format!(
                        "{folder}: active {:.2}B vs stated {a} ({source})",
                        computed / 1e9
                    ));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

#[test]
fn hybrid_models_hold_a_fixed_state_not_a_growing_cache() {
    for d in corpora() {
        let sys = System::load("8x-b200-nvlink").unwrap();
        for (folder, growing_layers) in [
            ("Qwen--Qwen3.5-397B-A17B", 15.0),
            ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 6.0),
        ] {
            let dir = d.join(folder);
            if !dir.is_dir() {
                continue;
            }
            let m = import(&dir);
            let sc = Scenario::new(&m, &sys, layout(&m, &sys)).unwrap();
            let short = sc.memory(1.0, 1024.0);
            let long = sc.memory(1.0, 131_072.0);
            assert!(short.state_bytes_per_sequence_per_gpu > 0.0, "{folder}");
            // Only the full-attention layers grow with the context.
            let (kv, d) = match m.attention() {
                rooftop::spec::Attention::Gqa { kv_heads, head_dim } => (kv_heads, head_dim),
                _ => unreachable!(),
            };
            let kv_local = (kv as f64 / sc.parallel.tp as f64).max(1.0);
            let per_token =
                growing_layers * 2.0 * kv_local * d as f64 * m.quantization.kv_cache.bytes();
            assert_eq!(short.kv_bytes_per_token_per_gpu, per_token, "{folder}");
            let grow = (long.kv_needed_gb - short.kv_needed_gb) * 1e9;
            assert!(
                (grow - per_token * (131_072.0 - 1024.0)).abs() < 1e-6 * grow,
                "{folder}"
            );
        }
    }
}

/// Vision-language configs report their encoder's prefill-time cost per image (never below
/// its speed of light, and more for a larger encoder's work); text-only models report none.
#[test]
fn vision_language_models_report_their_encoder_per_image() {
    for d in corpora() {
        let sys = System::load("8x-b200-nvlink").unwrap();
        let mut seen = 0;
        for dir in folders(&d) {
            let m = import(&dir);
            let sc = Scenario::new(&m, &sys, layout(&m, &sys)).unwrap();
            let p = predict(&sc, 1, 1024).unwrap();
            match (&m.vision, &p.vision) {
                (Some(_), Some(v)) => {
                    seen += 1;
                    assert!(v.patches > 0.0 && v.gflops_per_image > 0.0, "{}", m.name);
                    assert!(
                        v.ms_per_image >= v.sol_ms_per_image && v.sol_ms_per_image > 0.0,
                        "{}: {} ms vs SOL {} ms",
                        m.name,
                        v.ms_per_image,
                        v.sol_ms_per_image
                    );
                }
                (None, None) => {}
                (a, b) => panic!("{}: vision spec {a:?} but record {b:?}", m.name),
            }
        }
        assert!(
            seen >= 2,
            "only {seen} vision-language configs in the corpus"
        );
    }
}

/// The explorer's separable grid (context-free operators once per batch, attention per
/// context) equals a full evaluation for every layer kind the corpus brings.
#[test]
fn context_grid_equals_full_evaluation_for_every_corpus_config() {
    use rooftop::cost::{CostParams, Evaluator, Pass};
    for d in corpora() {
        let sys = System::load("8x-b200-nvlink").unwrap();
        let contexts = [0.0, 100.0, 4096.0, 70000.0];
        let mut out = Vec::new();
        for dir in folders(&d) {
            let m = import(&dir);
            let par = layout(&m, &sys);
            let ev = Evaluator::new(&m, &sys, par, CostParams::default_for(&sys)).unwrap();
            for batch in [1.0, 64.0] {
                ev.decode_times(batch, &contexts, &mut out);
                for (c, t) in contexts.iter().zip(&out) {
                    let full = ev.step_time(&Pass::decode(batch, *c));
                    assert_eq!(*t, full, "{} batch {batch} context {c}", m.name);
                }
            }
        }
    }
}
