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
