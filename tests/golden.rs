//! The golden file: outputs over every built-in scenario, so a refactor can show it moved no
//! number.
//!
//! Every built-in model × every built-in system it fits on (tensor parallel over all of the
//! system's GPUs) × batches 1/8/64/512 × contexts 1k/32k: TPOT, SOL TPOT, throughput and both
//! breakdowns of a decode step; weights and KV bytes per GPU; a prefill pass and a decode
//! step with chunked prefill mixed in; one serving sweep per (model, system); and speculative
//! decoding with every draft the model ships (its MTP layer, its EAGLE head) at a fixed
//! acceptance.
//!
//! The refactor contract is 1e-9 relative. A deliberate physics change regenerates the file
//! in its own commit (`ROOFTOP_UPDATE_GOLDEN=1 cargo test --test golden`, which rewrites the
//! file and then fails on purpose; rerun without the variable to check) and says why.

use rooftop::cost::{Category, Parallel, Pass};
use rooftop::predict::{predict, Scenario};
use rooftop::serve::{sweep, TpotDef, Workload};
use rooftop::spec::registry::{builtin_names, load_model, Kind};
use rooftop::spec::System;
use rooftop::specdec::{specdec, Acceptance, Draft};
use std::collections::BTreeMap;
use std::path::PathBuf;

const BATCHES: [u32; 4] = [1, 8, 64, 512];
const CONTEXTS: [u32; 2] = [1024, 32768];

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/builtin_scenarios.json")
}

/// Every recorded number, keyed `model|system|what`.
fn compute() -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for mname in builtin_names(Kind::Model) {
        let model = load_model(mname).unwrap();
        for sname in builtin_names(Kind::System) {
            let system = System::load(sname).unwrap();
            let par = Parallel::tp(system.spec.gpu_count);
            let Ok(sc) = Scenario::new(&model, &system, par) else {
                continue;
            };
            let mem = sc.memory(1.0, 1024.0);
            if mem.kv_budget_gb <= 0.0 {
                continue;
            }
            let key = |what: &str| format!("{mname}|{sname}|{what}");
            out.insert(key("weights_per_gpu_gb"), mem.weights_per_gpu_gb);
            out.insert(
                key("kv_bytes_per_token_per_gpu"),
                mem.kv_bytes_per_token_per_gpu,
            );
            for b in BATCHES {
                for c in CONTEXTS {
                    let p = predict(&sc, b, c).unwrap();
                    let k = |what: &str| key(&format!("b{b}|c{c}|{what}"));
                    out.insert(k("tpot_ms"), p.tpot_ms);
                    out.insert(k("sol_tpot_ms"), p.sol_tpot_ms);
                    out.insert(k("throughput_tok_s"), p.throughput_tok_s);
                    out.insert(k("kernels_per_step"), p.kernels_per_step as f64);
                    out.insert(k("allreduces_per_step"), p.allreduces_per_step as f64);
                    for cat in Category::ALL {
                        out.insert(
                            k(&format!("breakdown_ms.{}", cat.name())),
                            p.breakdown_ms[cat.name()],
                        );
                        out.insert(
                            k(&format!("sol_breakdown_ms.{}", cat.name())),
                            p.sol_breakdown_ms[cat.name()],
                        );
                    }
                }
            }
            let ev = sc.evaluator().unwrap();
            out.insert(
                key("prefill_1x1024_ms"),
                ev.step_time(&Pass::prefill(1.0, 1024.0, 0.0)) * 1e3,
            );
            out.insert(
                key("prefill_4x2048_after_2048_ms"),
                ev.step_time(&Pass::prefill(4.0, 2048.0, 2048.0)) * 1e3,
            );
            out.insert(
                key("decode_32x4096_mixed_512of1000_ms"),
                ev.step_time(&Pass::decode(32.0, 4096.0).with_prefill(512.0, 1000.0)) * 1e3,
            );
            let sw = sweep(
                &sc,
                &[1, 16, 128],
                Workload {
                    input_len: 1000,
                    output_len: 1000,
                    tpot_def: TpotDef::Itl,
                    client: Default::default(),
                },
            )
            .unwrap();
            out.insert(key("sweep.plateau_tok_s"), sw.plateau_tok_s);
            for pt in &sw.points {
                let c = pt.concurrency;
                out.insert(key(&format!("sweep.c{c}.tpot_ms")), pt.tpot_ms);
                out.insert(key(&format!("sweep.c{c}.ttft_ms")), pt.ttft_ms);
                out.insert(
                    key(&format!("sweep.c{c}.throughput_tok_s")),
                    pt.throughput_tok_s,
                );
            }
            for draft in drafts(&model) {
                let Ok(r) = specdec(
                    &sc,
                    &draft,
                    &Acceptance(vec![0.8, 0.6, 0.4]),
                    &[1, 3],
                    &[1, 16, 128],
                    1024,
                ) else {
                    continue;
                };
                let d = draft.name();
                for pt in &r.points {
                    let k = |what: &str| {
                        key(&format!("specdec.{d}.k{}.c{}.{what}", pt.k, pt.concurrency))
                    };
                    out.insert(k("speedup"), pt.speedup);
                    out.insert(k("tpot_ms"), pt.tpot_ms);
                    out.insert(k("draft_ms"), pt.draft_ms);
                    out.insert(k("running"), pt.running as f64);
                }
            }
        }
    }
    out
}

/// The drafts a model ships: its MTP layer, its EAGLE head (as EAGLE-1/2 through the
/// target's lm_head, and as the EAGLE-3 head it is).
fn drafts(model: &rooftop::spec::ModelSpec) -> Vec<Draft> {
    let mut d = Vec::new();
    if model.config.num_nextn_predict_layers.unwrap_or(0) > 0 {
        d.push(Draft::Mtp);
    }
    if model.eagle_head.is_some() {
        d.push(Draft::Eagle);
        d.push(Draft::Eagle3);
    }
    d
}

#[test]
fn builtin_scenarios_match_the_golden_file() {
    let now = compute();
    assert!(now.len() > 1000, "golden set too small: {}", now.len());
    for (k, v) in &now {
        assert!(v.is_finite(), "{k} = {v}");
    }
    let path = golden_path();
    if std::env::var_os("ROOFTOP_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = serde_json::to_string_pretty(&now).unwrap();
        std::fs::write(&path, text + "\n").unwrap();
        // Rewriting is not checking: the run that rewrites the file never passes.
        panic!(
            "golden file rewritten at {} ({} values); unset ROOFTOP_UPDATE_GOLDEN and rerun to check it",
            path.display(),
            now.len()
        );
    }
    let text = std::fs::read_to_string(&path).expect("golden file missing");
    let want: BTreeMap<String, f64> = serde_json::from_str(&text).unwrap();
    let mut bad = Vec::new();
    for (k, w) in &want {
        match now.get(k) {
            None => bad.push(format!("{k}: missing now (golden {w})")),
            Some(v) => {
                let tol = 1e-9 * w.abs().max(v.abs()) + 1e-12;
                if (v - w).abs() > tol {
                    bad.push(format!("{k}: {v} vs golden {w}"));
                }
            }
        }
    }
    for k in now.keys() {
        if !want.contains_key(k) {
            bad.push(format!("{k}: new, not in the golden file"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} golden values moved:\n{}",
        bad.len(),
        want.len(),
        bad.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}
