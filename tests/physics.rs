//! The cost model obeys physics on every built-in model and system: the breakdown sums to
//! the total, the speed-of-light bound is never above the prediction, more bandwidth or
//! FLOPS never slows anything, and more batch or context never makes a step faster.

use rooftop::cost::memory::{count_params, weight_bytes_per_gpu};
use rooftop::cost::{CostParams, Evaluator, Parallel, Pass};
use rooftop::spec::registry::{builtin_names, load_model, Kind};
use rooftop::spec::{ModelSpec, System};

fn models() -> Vec<ModelSpec> {
    builtin_names(Kind::Model)
        .into_iter()
        .map(|n| load_model(n).unwrap())
        .collect()
}

fn systems() -> Vec<System> {
    builtin_names(Kind::System)
        .into_iter()
        .map(|n| System::load(n).unwrap())
        .collect()
}

/// A layout the model accepts on the system: the largest TP that divides heads and GPUs.
fn layout(m: &ModelSpec, s: &System) -> Option<Parallel> {
    let mut tp = s.spec.gpu_count;
    while tp > 0 {
        let p = Parallel::tp(tp);
        if p.validate(m, s).is_ok() {
            return Some(p);
        }
        tp /= 2;
    }
    None
}

fn step(
    m: &ModelSpec,
    s: &System,
    p: Parallel,
    params: CostParams,
    batch: f64,
    ctx: f64,
) -> rooftop::cost::StepCost {
    Evaluator::new(m, s, p, params)
        .unwrap()
        .evaluate(&Pass::decode(batch, ctx))
}

#[test]
fn breakdown_sums_to_total_and_sol_is_a_lower_bound() {
    for m in models() {
        for s in systems() {
            let Some(p) = layout(&m, &s) else { continue };
            for &b in &[1.0, 8.0, 128.0] {
                for &c in &[128.0, 4096.0] {
                    let d = step(&m, &s, p, CostParams::default_for(&s), b, c);
                    let sol = step(&m, &s, p, CostParams::speed_of_light(), b, c);
                    let sum: f64 = d.breakdown.0.iter().sum();
                    assert!(
                        (sum - d.total).abs() <= 1e-12 * d.total.max(1.0),
                        "{} {}: breakdown {sum} != total {}",
                        m.name,
                        s.spec.name,
                        d.total
                    );
                    assert!(d.total.is_finite() && d.total > 0.0);
                    assert!(
                        sol.total <= d.total * (1.0 + 1e-12),
                        "{} on {} b={b} c={c}: SOL {} > default {}",
                        m.name,
                        s.spec.name,
                        sol.total,
                        d.total
                    );
                    for (cat, (x, y)) in
                        d.breakdown.0.iter().zip(sol.breakdown.0.iter()).enumerate()
                    {
                        assert!(
                            x.is_finite() && *x >= 0.0 && y.is_finite() && *y >= 0.0,
                            "category {cat}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn tpot_grows_with_batch_and_context() {
    for m in models() {
        for s in systems() {
            let Some(p) = layout(&m, &s) else { continue };
            for params in [CostParams::default_for(&s), CostParams::speed_of_light()] {
                let mut last = 0.0;
                for b in [1.0, 2.0, 4.0, 16.0, 64.0, 256.0, 1024.0] {
                    let t = step(&m, &s, p, params, b, 1024.0).total;
                    assert!(
                        t >= last * (1.0 - 1e-12),
                        "{} on {}: batch {b} step {t} < {last}",
                        m.name,
                        s.spec.name
                    );
                    last = t;
                }
                let mut last = 0.0;
                for c in [0.0, 100.0, 1000.0, 10_000.0, 100_000.0] {
                    let t = step(&m, &s, p, params, 8.0, c).total;
                    assert!(
                        t >= last * (1.0 - 1e-12),
                        "{} on {}: context {c} step {t} < {last}",
                        m.name,
                        s.spec.name
                    );
                    last = t;
                }
            }
        }
    }
}

#[test]
fn more_bandwidth_or_flops_never_slows_anything() {
    for m in models() {
        for s in systems() {
            let Some(p) = layout(&m, &s) else { continue };
            let base = |sys: &System, b: f64| {
                step(&m, sys, p, CostParams::default_for(sys), b, 2048.0).total
            };
            for &b in &[1.0, 32.0, 512.0] {
                let t0 = base(&s, b);
                let mut faster_mem = s.clone();
                faster_mem.gpu.memory_bandwidth.0 *= 1.5;
                let mut faster_link = s.clone();
                faster_link.link.p2p_bandwidth.0 *= 2.0;
                faster_link.link.bandwidth_per_direction.0 *= 2.0;
                if let Some(c) = faster_link.link.cross_socket_bandwidth.as_mut() {
                    c.0 *= 2.0;
                }
                let mut faster_flops = s.clone();
                let d = &mut faster_flops.gpu.dense_peak;
                for f in [&mut d.bf16, &mut d.fp8, &mut d.fp4, &mut d.int8]
                    .into_iter()
                    .flatten()
                {
                    f.0 *= 2.0;
                }
                for (what, sys) in [
                    ("memory bandwidth", &faster_mem),
                    ("link bandwidth", &faster_link),
                    ("FLOPS", &faster_flops),
                ] {
                    let t = base(sys, b);
                    assert!(
                        t <= t0 * (1.0 + 1e-12),
                        "{} on {} batch {b}: more {what} gave {t} > {t0}",
                        m.name,
                        s.spec.name
                    );
                }
            }
        }
    }
}

#[test]
fn parameter_counts_match_published_totals() {
    for m in models() {
        let Some(published) = m.published_total_params else {
            continue;
        };
        let c = count_params(&m);
        let err = (c.total - published).abs() / published;
        assert!(
            err < 0.02,
            "{}: counted {:.4e} vs published {published:.4e} ({:.2} %)",
            m.name,
            c.total,
            err * 100.0
        );
    }
    // The three named in the brief, by name so a missing file fails loudly.
    for (name, total) in [
        ("kimi-k2.5-int4", 1.03e12),
        ("deepseek-v3-fp8", 671e9),
        ("llama-3.1-70b", 70.6e9),
    ] {
        let c = count_params(&load_model(name).unwrap());
        assert!(
            (c.total - total).abs() / total < 0.02,
            "{name}: {:.4e}",
            c.total
        );
    }
}

#[test]
fn kimi_on_the_team_box_holds_about_76_gb_of_weights_per_gpu() {
    // shared/reference/hardware.md: "8 × 96 GB with a 1T INT4 model (≈ 76 GB of weights per GPU)"
    let m = load_model("kimi-k2.5-int4").unwrap();
    let w = weight_bytes_per_gpu(&m, &Parallel::tp(8)) / 1e9;
    assert!((74.0..79.0).contains(&w), "{w} GB");
    // MLA latent cache: 61 × (512 + 64) × 2 B per token (shared/reference/models.md)
    assert_eq!(m.kv_bytes_per_token(), 70_272.0);
}

#[test]
fn mla_kv_cache_does_not_shrink_with_tp_but_gqa_does() {
    use rooftop::cost::memory::kv_bytes_per_token_per_gpu;
    let kimi = load_model("kimi-k2.5-int4").unwrap();
    assert_eq!(
        kv_bytes_per_token_per_gpu(&kimi, &Parallel::tp(8)),
        kv_bytes_per_token_per_gpu(&kimi, &Parallel::tp(1))
    );
    let llama = load_model("llama-3.1-70b").unwrap();
    let t1 = kv_bytes_per_token_per_gpu(&llama, &Parallel::tp(1));
    let t8 = kv_bytes_per_token_per_gpu(&llama, &Parallel::tp(8));
    assert!((t1 / t8 - 8.0).abs() < 1e-9);
}

#[test]
fn moe_step_cost_rises_with_batch_then_flattens_as_experts_saturate() {
    let m = load_model("kimi-k2.5-int4").unwrap();
    let s = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let ev = Evaluator::new(&m, &s, Parallel::tp(8), CostParams::speed_of_light()).unwrap();
    let moe = |b: f64| {
        ev.evaluate(&Pass::decode(b, 0.0))
            .breakdown
            .get(rooftop::cost::Category::Moe)
    };
    // 1 → 64 tokens touches ~ 8 → 282 experts: MoE time grows many-fold ...
    assert!(moe(64.0) > 10.0 * moe(1.0));
    // ... and between 512 and 1024 tokens almost every expert is already read.
    assert!(moe(1024.0) < 1.3 * moe(512.0));
}

#[test]
fn unfused_dequantization_adds_a_cast_pass() {
    let m = load_model("glm-5-nvfp4").unwrap();
    let s = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let mut fused = s.clone();
    fused.engine.unfused_dequant.clear();
    let d = |sys: &System| {
        Evaluator::new(&m, sys, Parallel::tp(8), CostParams::default_for(sys))
            .unwrap()
            .evaluate(&Pass::decode(1.0, 1024.0))
    };
    let a = d(&s);
    let b = d(&fused);
    assert!(a.breakdown.get(rooftop::cost::Category::Dequant) > 0.0);
    assert_eq!(b.breakdown.get(rooftop::cost::Category::Dequant), 0.0);
    assert!(a.total > b.total);
}

#[test]
fn pipeline_stages_split_the_weights() {
    // The most loaded stage holds at least its share and never more than the whole.
    for m in models() {
        let whole = weight_bytes_per_gpu(&m, &Parallel::tp(1));
        for pp in [2u32, 4, 8] {
            if pp > m.config.num_hidden_layers {
                continue;
            }
            let p = Parallel {
                tp: 1,
                ep: 1,
                pp,
                dp: 1,
                redundant_experts: 0,
            };
            let stage = weight_bytes_per_gpu(&m, &p);
            assert!(
                stage >= whole / pp as f64 * (1.0 - 1e-9),
                "{} pp{pp}: {stage} < share {}",
                m.name,
                whole / pp as f64
            );
            assert!(stage <= whole, "{} pp{pp}", m.name);
        }
    }
}

/// The explorer's separable grid (context-free operators once per batch, attention per
/// context) gives exactly what a full evaluation gives, for every layout kind.
#[test]
fn context_grid_equals_full_evaluation() {
    for (model, system, par) in [
        ("kimi-k2.5-int4", "8x-rtx-pro-6000-pcie", "tp8"),
        ("deepseek-v3-fp8", "8x-h200-nvlink", "tp4pp2"),
        ("gpt-oss-120b", "8x-h100-nvlink", "tp2ep2dp2"),
        ("llama-3.1-70b", "8x-h100-nvlink", "tp8"),
    ] {
        let m = load_model(model).unwrap();
        let s = System::load(system).unwrap();
        let par: Parallel = par.parse().unwrap();
        for params in [CostParams::default_for(&s), CostParams::speed_of_light()] {
            let ev = Evaluator::new(&m, &s, par, params).unwrap();
            let contexts = [0.0, 1.0, 1000.0, 4096.0, 131072.0];
            let mut out = Vec::new();
            for batch in [1.0, 7.0, 64.0, 1000.0] {
                ev.decode_times(batch, &contexts, &mut out);
                for (c, t) in contexts.iter().zip(&out) {
                    let pass = Pass::decode(batch, *c);
                    let full = ev.evaluate(&pass).total;
                    assert_eq!(*t, full, "{model} {par} batch {batch} context {c}");
                    assert_eq!(ev.step_time(&pass), full);
                }
            }
        }
    }
}

/// A longer context never decodes faster, at every step of 16 positions through the split-KV
/// boundaries of the decode-attention kernel model, on every generation's GPU.
#[test]
fn decode_never_gets_faster_with_context() {
    for (model, system) in [
        ("llama-3.1-8b", "8x-l40s-pcie"),
        ("qwen3-30b-a3b", "8x-h100-nvlink"),
        ("gpt-oss-120b", "8x-b200-nvlink"),
        ("llama-3.1-70b", "8x-rtx-pro-6000-pcie"),
    ] {
        let m = load_model(model).unwrap();
        let s = System::load(system).unwrap();
        let ev = Evaluator::new(&m, &s, Parallel::tp(8), CostParams::default_for(&s)).unwrap();
        for batch in [1.0, 3.0, 64.0] {
            let mut last = 0.0;
            for c in (0..20_000).step_by(16) {
                let t = ev.step_time(&Pass::decode(batch, c as f64));
                assert!(
                    t >= last * (1.0 - 1e-12),
                    "{model} on {system}, batch {batch}: context {c} decodes in {t} s < {last} s"
                );
                last = t;
            }
        }
    }
}

#[test]
fn a_monolithic_moe_kernel_has_no_separate_router_op() {
    use rooftop::cost::generation::Generation;
    use rooftop::ops::BlockKind;
    // The router top-k ops of one MoE layer at batch 8.
    let topk = |model: &str, system: &str| {
        let m = load_model(model).unwrap();
        let s = System::load(system).unwrap();
        let p = layout(&m, &s).unwrap();
        let ev = Evaluator::new(&m, &s, p, CostParams::default_for(&s)).unwrap();
        let ops = ev.block_ops(BlockKind::Moe, &Pass::decode(8.0, 1024.0));
        assert!(ops.iter().any(|o| o.name == "router_gate"), "{model}");
        ops.iter().filter(|o| o.name == "router_topk").count()
    };
    // gpt-oss's MXFP4 experts: a monolithic family on SM100 and Hopper takes the logits.
    for system in ["8x-b200-nvlink", "8x-h100-nvlink"] {
        let sys = System::load(system).unwrap();
        let g = Generation::of(&sys.gpu).unwrap().kernels();
        assert!(g.moe["mxfp4"].routing_inside);
        assert_eq!(topk("gpt-oss-120b", system), 0, "{system}");
        // A modular family (DeepSeek's block-scaled FP8) still runs its own top-k.
        assert!(!g.moe["fp8-block"].routing_inside);
        assert_eq!(topk("deepseek-v3-fp8", system), 1, "{system}");
    }
}

/// A prediction's operators and what runs outside them (the pipeline's transfers and waits,
/// the engine's CPU work the kernels do not hide) sum to its TPOT, with and without pipeline
/// stages, with and without overlap scheduling.
#[test]
fn operators_and_what_runs_outside_them_sum_to_the_tpot() {
    use rooftop::predict::{predict, Scenario};
    let m = load_model("llama-3.1-70b").unwrap();
    for engine in ["vllm-v1", "vllm-v1-async", "sglang", "trtllm"] {
        let s = System::load_with_engine("8x-h100-nvlink", Some(engine), &[]).unwrap();
        for (tp, pp) in [(8, 1), (4, 2), (2, 4)] {
            let par = Parallel {
                tp,
                ep: 1,
                pp,
                dp: 1,
                redundant_experts: 0,
            };
            for batch in [1, 8, 64] {
                let sc = Scenario::new(&m, &s, par).unwrap();
                let p = predict(&sc, batch, 2048).unwrap();
                let ops: f64 = p.ops.iter().map(|r| r.total_ms).sum();
                let x = p.outside_operators_ms;
                assert!(
                    x.pipeline >= 0.0 && x.engine_cpu >= 0.0,
                    "{engine} {par} b{batch}"
                );
                let sum = ops + x.pipeline + x.engine_cpu;
                assert!(
                    (sum - p.tpot_ms).abs() <= 1e-9 * p.tpot_ms,
                    "{engine} {par} b{batch}: ops {ops} + {x:?} = {sum} != tpot {}",
                    p.tpot_ms
                );
                if pp > 1 {
                    assert!(x.pipeline > 0.0, "{engine} {par}: stages pass activations");
                }
            }
        }
    }
}
