//! Engines as descriptions: every built-in engine resolves on every built-in system, every
//! number in an engine file names its source, `--engine` replaces the system's default and
//! `--set engine.X` still changes the resolved engine.

mod common;

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
    common::json_of(&args)
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

#[test]
fn an_engine_runs_the_gemm_family_it_names_and_the_tables_keep_the_measured_one() {
    use rooftop::cost::kernels::gemm_time;
    use rooftop::cost::{CostParams, Device};
    use rooftop::kernel_check::check_table;
    use rooftop::measured::kernel_table::parse_kernel_table;
    use rooftop::spec::WeightFormat;
    // Every family an engine names exists in the generation it names it for.
    for e in builtin_names(Kind::Engine) {
        for s in builtin_names(Kind::System) {
            let sys = System::load_with_engine(s, Some(e), &[]).unwrap();
            Device::new(&sys, CostParams::default_for(&sys)).unwrap();
        }
    }
    let trt = System::load_with_engine("8x-b200-nvlink", Some("trtllm"), &[]).unwrap();
    let sgl = System::load_with_engine("8x-b200-nvlink", Some("sglang"), &[]).unwrap();
    assert_eq!(
        trt.engine.gemm_family.get("fp8").map(String::as_str),
        Some("serving")
    );
    assert!(sgl.engine.gemm_family.is_empty());
    let hopper = System::load_with_engine("8x-h100-nvlink", Some("trtllm"), &[]).unwrap();
    assert!(hopper.engine.gemm_family.is_empty());
    // A decode-shape FP8 GEMM: the serving family streams the weights faster than the
    // microbenchmarked CUTLASS kernel; other formats are the same kernel.
    let t = |s: &System, w: WeightFormat| {
        let dev = Device::new(s, CostParams::default_for(s)).unwrap();
        gemm_time(&dev, 16.0, 4096.0, 8192.0, w, false).0
    };
    let fp8: WeightFormat = "fp8".parse().unwrap();
    assert!(t(&trt, fp8) < t(&sgl, fp8));
    assert_eq!(t(&trt, WeightFormat::BF16), t(&sgl, WeightFormat::BF16));
    // The GEMM table measured one kernel selection: every engine prices its rows alike.
    let table = parse_kernel_table(
        "m,n,k,dtype,latency_ms,kernel\n16,4096,8192,fp8,0.034241,CutlassFP8ScaledMMLinearKernel\n",
        "gemm_b200.csv",
    )
    .unwrap();
    let row = |s: &System| check_table(&table, s, None).unwrap()[0].default;
    assert_eq!(row(&trt), row(&sgl));
}

/// Kernels per decode step of `model` on `system` under `engine` (the system's GPUs as TP).
fn kernels_per_step(model: &str, system: &System) -> u32 {
    use rooftop::cost::{CostParams, Evaluator, Parallel, Pass};
    let m = rooftop::spec::registry::load_model(model).unwrap();
    let mut tp = system.spec.gpu_count;
    while Parallel::tp(tp).validate(&m, system).is_err() {
        tp /= 2;
    }
    let ev = Evaluator::new(
        &m,
        system,
        Parallel::tp(tp),
        CostParams::default_for(system),
    )
    .unwrap();
    ev.evaluate(&Pass::decode(16.0, 1024.0))
        .ops_with_counts()
        .iter()
        .map(|(o, n)| o.kernels * n)
        .sum()
}

#[test]
fn an_engine_that_fuses_never_runs_more_kernels_than_one_that_does_not() {
    for system in ["8x-h100-nvlink", "8x-b200-nvlink"] {
        let fused = System::load_with_engine(system, Some("trtllm"), &[]).unwrap();
        assert!(fused.engine.fusion.allreduce_norm);
        let mut plain = fused.clone();
        plain.engine.fusion = Default::default();
        for model in builtin_names(Kind::Model) {
            let (f, p) = (
                kernels_per_step(model, &fused),
                kernels_per_step(model, &plain),
            );
            assert!(
                f <= p,
                "{model} on {system}: {f} kernels fused > {p} unfused"
            );
        }
        // Llama-3.1-70B (hidden 8192) over 8 GPUs: both all-reduces of each of its 80
        // layers take the next norm along, and attention applies RoPE.
        let (f, p) = (
            kernels_per_step("llama-3.1-70b-fp8", &fused),
            kernels_per_step("llama-3.1-70b-fp8", &plain),
        );
        assert_eq!(p - f, 3 * 80, "{system}");
        // Llama-3.1-8B (hidden 4096, below the all-reduce fusion): only RoPE, one rotary
        // kernel in each of its 32 layers.
        let (f, p) = (
            kernels_per_step("llama-3.1-8b", &fused),
            kernels_per_step("llama-3.1-8b", &plain),
        );
        assert_eq!(p - f, 32, "{system}");
    }
}

#[test]
fn a_collective_in_a_graph_costs_its_call_time_and_eagerly_its_launch_too() {
    use rooftop::cost::price::cost;
    use rooftop::cost::{CostParams, Device};
    use rooftop::ops::{Category, CollectiveKind, Op, Operator};
    let sys = System::load("8x-h100-nvlink").unwrap();
    let dev = Device::new(&sys, CostParams::default_for(&sys)).unwrap();
    let ar = Operator::new(
        "allreduce_attn",
        Category::Allreduce,
        1,
        Op::Collective {
            kind: CollectiveKind::AllReduce,
            bytes: 64.0 * 1024.0,
            ranks: 8,
            stride: 1,
        },
    );
    // The call time, fitted to back-to-back calls (dispatch included), is all it costs in a
    // graph: no kernel gap on top.
    let graphed = cost(&ar, &dev);
    assert!(graphed.time > 0.0);
    assert_eq!(graphed.overhead, 0.0);
    assert_eq!(graphed.total(), graphed.time);
    // A GEMM in the same graph still pays its gap.
    let gemm = Operator::new(
        "o_proj",
        Category::Gemm,
        1,
        Op::Gemm {
            m: 4.0,
            n: 8192.0,
            k: 8192.0,
            weights: rooftop::spec::WeightFormat::BF16,
            resident: true,
            after_cast: false,
        },
    );
    assert!(cost(&gemm, &dev).overhead > 0.0);
    // Launched eagerly, the collective's launch is not hidden.
    assert!(cost(&ar, &dev.eager()).overhead > 0.0);
}

/// The engine's release picks its release-bound rules: vLLM before 0.16 casts NVFP4 to BF16
/// on SM120 (the team's GLM-5 deployment), 0.24 computes it natively (the SM120 kernel
/// tables measure native rows); the SM100 FP8 serving family holds before 0.24 only.
#[test]
fn the_engine_release_decides_the_kernel_path() {
    use rooftop::cost::{Category, CostParams, Parallel};
    let at = |engine: &str| System::load_with_engine("8x-rtx-pro-6000-pcie", Some(engine), &[]);
    let old = at("vllm-v1").unwrap();
    let native = at("vllm-v1@0.24").unwrap();
    assert!(!old.engine.unfused_dequant.is_empty());
    assert!(native.engine.unfused_dequant.is_empty());
    assert_eq!(native.engine.name, "vllm-v1@0.24");
    assert!(at("vllm-v1@0.16")
        .unwrap()
        .engine
        .unfused_dequant
        .is_empty());
    assert!(!at("vllm-v1@0.15.1")
        .unwrap()
        .engine
        .unfused_dequant
        .is_empty());
    let b200 = |e: &str| {
        System::load_with_engine("8x-b200-nvlink", Some(e), &[])
            .unwrap()
            .engine
            .gemm_family
    };
    assert!(b200("vllm-v1@0.19.0").contains_key("fp8"));
    assert!(b200("vllm-v1@0.24").is_empty());
    // A release that is not one is refused, naming it.
    let e = at("vllm-v1@latest").unwrap_err().to_string();
    assert!(e.contains("latest") && e.contains("release"), "{e}");
    // GLM-5 NVFP4 at batch 1 on the team's box: the older path's casts are most of the
    // decode kernel time (every local expert's weights written as BF16 each step; the
    // record's profile saw 69 %, nothing here is fitted to it), the native path has none.
    let m = rooftop::spec::registry::load_model("glm-5-nvfp4").unwrap();
    let share = |sys: &System| {
        let p = CostParams::default_for(sys);
        let b = rooftop::cost::Evaluator::new(&m, sys, Parallel::tp(8), p)
            .unwrap()
            .evaluate(&rooftop::cost::Pass::decode(1.0, 1024.0))
            .breakdown;
        b.get(Category::Dequant) / b.kernel_time()
    };
    assert!(share(&old) >= 0.6, "cast share {}", share(&old));
    assert_eq!(share(&native), 0.0);
}

#[test]
fn each_engine_sizes_its_kv_cache_and_splits_weight_blocks_by_its_own_rule() {
    use rooftop::cost::Parallel;
    use rooftop::predict::Scenario;
    use rooftop::serve::does_not_fit;
    use rooftop::spec::registry::load_model;
    // TensorRT-LLM's free_gpu_memory_fraction is of what weights and activations leave;
    // vLLM's gpu_memory_utilization is of the whole GPU. DeepSeek FP8 at TP4 on B200 holds
    // ~169 GB of weights per GPU: past 0.9 of 180 GB, short of all of it.
    let m = load_model("deepseek-v3-fp8").unwrap();
    let trt = System::load_with_engine("8x-b200-nvlink", Some("trtllm"), &[]).unwrap();
    let vllm = System::load_with_engine("8x-b200-nvlink", Some("vllm-v1"), &[]).unwrap();
    let tp4 = Parallel::tp(4);
    let on_trt = Scenario::new(&m, &trt, tp4).unwrap().memory(1.0, 1024.0);
    let free = on_trt.capacity_gb - on_trt.weights_per_gpu_gb - on_trt.activation_reserve_gb;
    let fraction = trt.engine.gpu_memory_utilization.0;
    assert!(free > 0.0);
    assert!((on_trt.kv_budget_gb - fraction * free).abs() < 1e-9 * free);
    assert!(does_not_fit(&on_trt, 1.0, 1024.0).is_none());
    let on_vllm = Scenario::new(&m, &vllm, tp4).unwrap().memory(1.0, 1024.0);
    let why = does_not_fit(&on_vllm, 1.0, 1024.0).expect("vLLM cannot hold these weights");
    assert!(why.contains("exceed"), "{why}");
    // Where both fit, TensorRT-LLM keeps more room for KV: the tenth it withholds is a tenth
    // of the remainder, where vLLM's is a tenth of the whole GPU.
    let tp8 = Parallel::tp(8);
    let kv = |s: &System| {
        Scenario::new(&m, s, tp8)
            .unwrap()
            .memory(1.0, 1024.0)
            .kv_budget_gb
    };
    assert!(kv(&trt) > kv(&vllm));

    // TensorRT-LLM splits FP8 block scales as ceil(width / 128) with the weight: GLM's
    // 1,536-wide shared expert over 8 ranks (192 each) runs there and not under vLLM.
    let glm = load_model("glm-4.5-fp8").unwrap();
    let lay = Parallel {
        tp: 8,
        ep: 8,
        pp: 1,
        dp: 1,
        redundant_experts: 0,
    };
    let h_trt = System::load_with_engine("8x-h100-nvlink", Some("trtllm"), &[]).unwrap();
    let h_vllm = System::load_with_engine("8x-h100-nvlink", Some("vllm-v1"), &[]).unwrap();
    assert!(Scenario::new(&glm, &h_trt, lay).is_ok());
    let e = Scenario::new(&glm, &h_vllm, lay).err().unwrap().to_string();
    assert!(e.contains("192 per rank") && e.contains("vllm-v1"), "{e}");
}

/// Stderr of a rooftop run that must exit 1.
fn refusal(args: &[&str]) -> String {
    let out = Command::cargo_bin("rooftop")
        .unwrap()
        .args(args)
        .assert()
        .code(1);
    String::from_utf8(out.get_output().stderr.clone()).unwrap()
}

#[test]
fn a_refused_layout_names_layouts_that_run() {
    // Each suggested layout runs when given back on the command line.
    let glm = [
        "predict",
        "--model",
        "glm-4.5-fp8",
        "--system",
        "8x-h100-nvlink",
    ];
    let err = refusal(&[&glm[..], &["--tp", "8", "--ep", "8"]].concat());
    let list = err
        .split("layouts that run it on 8x-h100-nvlink: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no suggestion in: {err}"));
    let suggested: Vec<&str> = list.trim().split(", ").collect();
    assert!(!suggested.is_empty() && suggested.len() <= 3, "{err}");
    for flags in suggested {
        let args: Vec<&str> = glm.iter().copied().chain(flags.split(' ')).collect();
        Command::cargo_bin("rooftop")
            .unwrap()
            .args(&args)
            .assert()
            .success();
    }
    // Weights no layout of the system holds: the GPU count they need, at least.
    let err = refusal(&[
        "predict",
        "--model",
        "kimi-k2.5-int4",
        "--system",
        "4x-rtx-pro-6000-pcie",
    ]);
    assert!(
        err.contains("no layout of 4x-rtx-pro-6000-pcie runs it") && err.contains("need at least"),
        "{err}"
    );
}

/// An engine's `[[moe_library]]` rule holds on the architecture it names: vLLM run with
/// `VLLM_MXFP4_USE_MARLIN=1` prices MXFP4 experts with Marlin on Hopper, and B200 keeps its
/// generation's default.
#[test]
fn an_engine_rule_selects_the_moe_library_on_its_architecture() {
    let dir = std::env::temp_dir().join(format!("rooftop-moe-lib-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("vllm-marlin.toml");
    let base = builtin_text(Kind::Engine, "vllm-v1").unwrap();
    std::fs::write(
        &file,
        format!(
            "{base}\n[[moe_library]]\narch = \"SM90\"\nformats = [\"mxfp4\"]\nlibrary = \"marlin\"\n"
        ),
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let h100 = System::load_with_engine("8x-h100-nvlink", Some(path), &[]).unwrap();
    assert_eq!(
        h100.engine.moe_library.get("mxfp4").map(String::as_str),
        Some("marlin")
    );
    let b200 = System::load_with_engine("8x-b200-nvlink", Some(path), &[]).unwrap();
    assert!(b200.engine.moe_library.is_empty());
    std::fs::remove_dir_all(&dir).ok();
}

/// `predict` prices the step as the engine schedules it, as the serving loop does: with
/// overlap scheduling (SGLang) the fixed CPU cost hides behind the kernels, without it
/// (vLLM before 0.14) the CPU's fixed and per-sequence work follows them; the breakdown
/// still sums to the TPOT.
#[test]
fn predict_prices_the_engine_cpu_as_the_engine_schedules_it() {
    use rooftop::cost::{CostParams, Evaluator, Parallel, Pass};
    use rooftop::predict::{predict, Scenario};
    let m = rooftop::spec::registry::load_model("llama-3.1-70b-fp8").unwrap();
    for (engine, batch) in [
        ("sglang", 1u32),
        ("sglang", 64),
        ("vllm-v1@0.12", 1),
        ("vllm-v1@0.12", 64),
    ] {
        let s = System::load_with_engine("8x-h100-nvlink", Some(engine), &[]).unwrap();
        let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
        let p = predict(&sc, batch, 2048).unwrap();
        let pass = Evaluator::new(&m, &s, Parallel::tp(8), CostParams::default_for(&s))
            .unwrap()
            .evaluate(&Pass::decode(batch as f64, 2048.0))
            .total;
        let (fixed, per_seq) = (s.engine.step_overhead.0, s.engine.cpu.per_seq.0);
        let expected = if s.engine.cpu.overlap {
            (pass - fixed).max(fixed + per_seq * batch as f64)
        } else {
            pass + per_seq * batch as f64
        };
        assert!(
            (p.tpot_ms - expected * 1e3).abs() < 1e-9,
            "{engine} b={batch}: {} vs {}",
            p.tpot_ms,
            expected * 1e3
        );
        let sum: f64 = p.breakdown_ms.values().sum();
        assert!(
            (sum - p.tpot_ms).abs() < 1e-9,
            "{engine} b={batch}: {sum} vs {}",
            p.tpot_ms
        );
    }
}

/// vLLM schedules asynchronously by default from 0.14 (its release notes): vllm-v1 resolves
/// without overlap before that release and with it from then on, and at its default release
/// when none is named. A release that does not parse is refused naming the field.
#[test]
fn vllm_overlaps_its_cpu_work_from_the_release_that_made_async_scheduling_the_default() {
    let e = load_engine("vllm-v1").unwrap();
    let gpu = rooftop::spec::registry::load_gpu("h100-sxm").unwrap();
    let at = |r: Option<&str>| e.resolve(&gpu, 8, r).unwrap().cpu.overlap;
    assert!(!at(Some("0.12.0")));
    assert!(!at(Some("0.13")));
    assert!(at(Some("0.14")));
    assert!(at(Some("0.18.0")));
    assert!(at(None), "the default release 0.15");
    let mut bad = e.clone();
    bad.overlap_from = Some("soon".into());
    let (field, _) = bad.resolve(&gpu, 8, None).unwrap_err();
    assert_eq!(field, "overlap_from");
}

/// vLLM's default async scheduling excludes pipeline parallelism: a two-stage layout runs
/// its CPU work in series with the GPU's, a one-stage layout beside it.
#[test]
fn vllm_runs_pipeline_stages_without_async_scheduling() {
    use rooftop::cost::Parallel;
    use rooftop::predict::Scenario;
    let m = rooftop::spec::registry::load_model("llama-3.1-70b-fp8").unwrap();
    let s = System::load_with_engine("8x-h100-nvlink", Some("vllm-v1@0.18.0"), &[]).unwrap();
    let one = Parallel::resolve(&s, Some(8), None, None, None).unwrap();
    let two = Parallel::resolve(&s, Some(4), None, Some(2), None).unwrap();
    assert!(Scenario::new(&m, &s, one).unwrap().overlaps());
    assert!(!Scenario::new(&m, &s, two).unwrap().overlaps());
}

/// SGLang runs waiting prompts before any decode step (`prefill_mixes_with_decode = false`):
/// under a burst client with fixed lengths a wave of C prompts is prefilled whole, so its
/// mean TTFT is about half the wave's prefill, and its requests then decode together, so
/// their inter-token time holds only the part of the wave's prefill after their own first
/// token, less than the steady state's even share of every prefill. The same engine mixing
/// prefill into its decode steps spreads the wave out. Both breakdowns sum to the TPOT.
#[test]
fn sglang_prefills_first_and_keeps_a_bursts_waves_together() {
    use rooftop::cost::Parallel;
    use rooftop::predict::Scenario;
    use rooftop::serve::{sweep, TpotDef, Workload};
    let m = rooftop::spec::registry::load_model("qwen3-32b").unwrap();
    let client = rooftop::spec::registry::load_client("bench-serve-sweep")
        .unwrap()
        .model();
    let w = Workload {
        input_len: 4096,
        output_len: 128,
        tpot_def: TpotDef::Itl,
        client,
    };
    let first = System::load_with_engine("8x-h100-nvlink", Some("sglang"), &[]).unwrap();
    assert!(!first.engine.mixes_prefill_with_decode());
    let mut mixed = first.clone();
    mixed.engine.prefill_mixes_with_decode = Some(true);
    let at = |s: &System| {
        let sc = Scenario::new(&m, s, Parallel::tp(8)).unwrap();
        sweep(&sc, &[128], w).unwrap().points.remove(0)
    };
    let (a, b) = (at(&first), at(&mixed));
    // One prompt alone, the TTFT of C = 1 less its overlap step: a wave is 128 of them.
    let sc = Scenario::new(&m, &first, Parallel::tp(8)).unwrap();
    let one = sweep(&sc, &[1], w).unwrap().points.remove(0);
    let wave = 128.0 * one.ttft_ms / 2.0;
    assert!(
        a.ttft_ms > 0.35 * wave && a.ttft_ms < 0.8 * wave,
        "prefill first: TTFT {:.0} ms against a wave of {wave:.0} ms",
        a.ttft_ms
    );
    assert!(
        a.ttft_ms > 2.0 * b.ttft_ms,
        "{} vs {}",
        a.ttft_ms,
        b.ttft_ms
    );
    // The steady state of the same engine (a closed loop that never bursts).
    let steady = sweep(
        &sc,
        &[128],
        Workload {
            client: Default::default(),
            ..w
        },
    )
    .unwrap()
    .points
    .remove(0);
    assert!(
        a.tpot_itl_ms < steady.tpot_itl_ms,
        "{} vs {}",
        a.tpot_itl_ms,
        steady.tpot_itl_ms
    );
    for p in [&a, &b] {
        let sum: f64 = p.breakdown_ms.values().sum();
        assert!(
            (sum - p.tpot_itl_ms).abs() < 1e-9 * p.tpot_itl_ms,
            "{sum} vs {}",
            p.tpot_itl_ms
        );
        assert!(p.breakdown_ms["prefill"] >= 0.0, "{:?}", p.breakdown_ms);
    }
}

/// An engine description that leaves `prefill_mixes_with_decode` out mixes prompts into
/// its decode steps exactly when it chunks them (vLLM's two modes), whether it is a system's
/// inline `[engine]` or an engine file; a description that names it is taken at its word.
#[test]
fn an_engine_that_does_not_say_mixes_prefill_as_it_chunks_it() {
    let mut e = System::load("8x-h100-nvlink").unwrap().engine;
    for chunked in [true, false] {
        e.chunked_prefill = chunked;
        e.prefill_mixes_with_decode = None;
        assert_eq!(e.mixes_prefill_with_decode(), chunked);
        e.prefill_mixes_with_decode = Some(!chunked);
        assert_eq!(e.mixes_prefill_with_decode(), !chunked);
    }
    let sglang = System::load_with_engine("8x-h100-nvlink", Some("sglang"), &[]).unwrap();
    assert!(sglang.engine.chunked_prefill && !sglang.engine.mixes_prefill_with_decode());
}

/// SGLang's host time per eagerly launched kernel (`configs/engines/sglang.toml`) comes from
/// one log: a DeepSeek-V3 prefill of one new token, 82.6 ms as an eager forward, and prefills
/// below 100 tokens taking about as long (sgl-project/sglang PR 12160). rooftop's eager
/// forward of that pass must stay host-bound at that figure, flat in the tokens, so that the
/// derivation holds while the operator list changes.
#[test]
fn sglang_eager_forward_is_host_bound_at_the_log_its_launch_cost_comes_from() {
    use rooftop::cost::{CostParams, Evaluator, Parallel, Pass};
    use rooftop::spec::registry::load_model;
    let m = load_model("deepseek-v3-fp8").unwrap();
    let off =
        rooftop::spec::overrides::parse_all(&["system.cuda_graphs=false".to_string()]).unwrap();
    let eager = System::load_with_engine("8x-h200-nvlink", Some("sglang"), &off).unwrap();
    let graphed = System::load_with_engine("8x-h200-nvlink", Some("sglang"), &[]).unwrap();
    let time = |s: &System, tokens: f64| {
        Evaluator::new(&m, s, Parallel::tp(8), CostParams::default_for(s))
            .unwrap()
            .step_time(&Pass::prefill(1.0, tokens, 1.0))
    };
    let one = time(&eager, 1.0);
    assert!(
        (one / 82.6e-3 - 1.0).abs() < 0.1,
        "eager one-token forward {:.1} ms, the log 82.6 ms",
        one * 1e3
    );
    let hundred = time(&eager, 96.0);
    assert!(
        hundred >= one && hundred < 1.2 * one,
        "96 tokens {:.1} ms against one token's {:.1} ms: not host-bound",
        hundred * 1e3,
        one * 1e3
    );
    assert!(time(&graphed, 1.0) < 0.5 * one);
}
