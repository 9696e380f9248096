//! Engines as descriptions: every built-in engine resolves on every built-in system, every
//! number in an engine file names its source, `--engine` replaces the system's default and
//! `--set engine.X` still changes the resolved engine.

use assert_cmd::Command;
use rooftop::spec::registry::{builtin_names, builtin_text, load_engine, Kind};
use rooftop::spec::System;

#[test]
fn every_engine_resolves_on_every_system_and_cites_its_numbers() {
    let engines = builtin_names(Kind::Engine);
    assert!(engines.len() >= 4, "{engines:?}");
    for e in &engines {
        let file = load_engine(e).unwrap();
        let text = builtin_text(Kind::Engine, e).unwrap();
        let table: toml::Table = toml::from_str(text).unwrap();
        for key in table.keys() {
            if ["name", "description", "version", "sources", "cuda_graphs"].contains(&key.as_str())
            {
                continue;
            }
            assert!(
                file.sources.contains_key(key),
                "engine {e}: `{key}` has no entry in [sources]"
            );
        }
        for s in builtin_names(Kind::System) {
            let sys = System::load_with_engine(s, Some(e), &[]).unwrap();
            assert_eq!(sys.engine.name, *e);
        }
    }
}

#[test]
fn the_glm5_cast_path_belongs_to_the_vllm_version_that_had_it() {
    let sm120 = System::load("8x-rtx-pro-6000-pcie").unwrap();
    assert!(!sm120.engine.unfused_dequant.is_empty());
    let hopper = System::load("8x-h100-nvlink").unwrap();
    assert!(hopper.engine.unfused_dequant.is_empty());
    let other = System::load_with_engine("8x-rtx-pro-6000-pcie", Some("trtllm"), &[]).unwrap();
    assert!(other.engine.unfused_dequant.is_empty());
}

fn sweep_json(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["sweep", "--concurrency", "1,512", "--format", "json"];
    args.extend_from_slice(extra);
    let out = Command::cargo_bin("rooftop")
        .unwrap()
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn engine_flag_and_set_reach_the_sweep() {
    let base = sweep_json(&[]);
    let capped = sweep_json(&["--set", "engine.max_num_seqs=64"]);
    assert_eq!(capped["points"][1]["running"], 64);
    assert_ne!(base["points"][1]["running"], 64);
    let e = Command::cargo_bin("rooftop")
        .unwrap()
        .args(["predict", "--engine", "no-such-engine"])
        .output()
        .unwrap();
    assert!(!e.status.success());
    assert!(String::from_utf8_lossy(&e.stderr).contains("unknown engine"));
}

/// A batch beyond the engine's largest captured CUDA graph runs eagerly: never cheaper than
/// the same pass replayed from a graph, and the limit changes nothing within it.
#[test]
fn batches_beyond_the_capture_sizes_run_eagerly() {
    use rooftop::cost::{CostParams, Evaluator, Parallel, Pass};
    use rooftop::spec::registry::load_model;
    let m = load_model("deepseek-v3-fp8").unwrap();
    let capped = System::load_with_engine("8x-h200-nvlink", Some("vllm-v1"), &[]).unwrap();
    let max = capped
        .engine
        .cuda_graph_max_tokens
        .expect("vLLM caps its graphs");
    let mut unlimited = capped.clone();
    unlimited.engine.cuda_graph_max_tokens = None;
    let time = |s: &System, pass: &Pass| {
        Evaluator::new(&m, s, Parallel::tp(8), CostParams::default_for(s))
            .unwrap()
            .step_time(pass)
    };
    for pass in [
        Pass::decode(max as f64, 2048.0),
        Pass::decode(8.0, 2048.0).with_prefill(max as f64 - 8.0, 1000.0),
    ] {
        assert_eq!(time(&capped, &pass), time(&unlimited, &pass), "{pass:?}");
    }
    for pass in [
        Pass::decode(2.0 * max as f64, 2048.0),
        Pass::prefill(1.0, 4.0 * max as f64, 0.0),
        Pass::decode(32.0, 2048.0).with_prefill(2.0 * max as f64, 1000.0),
    ] {
        let (eager, graphed) = (time(&capped, &pass), time(&unlimited, &pass));
        assert!(
            eager >= graphed,
            "{pass:?}: eager {eager} < graphed {graphed}"
        );
    }
    // A prefill of a thousand tokens launches more kernels than its short ones hide.
    let p = Pass::prefill(1.0, 1024.0, 0.0);
    assert!(time(&capped, &p) > time(&unlimited, &p));
}
