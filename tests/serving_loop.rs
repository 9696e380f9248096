//! The serving loop's mechanisms beside the GPU: a client's connection cap, CPU overlap, a
//! burst start, and configurations that cannot serve.

use rooftop::cost::Parallel;
use rooftop::predict::Scenario;
use rooftop::serve::{sweep, ClientModel, Lengths, Start, TpotDef, Workload};
use rooftop::spec::registry::{load_client, load_model};
use rooftop::spec::System;

/// A built-in model by name.
fn model(name: &str) -> rooftop::spec::ModelSpec {
    load_model(name).unwrap()
}

/// The built-in InferenceMAX client with one more `[[launch]]` entry (`entry`: its keys),
/// read from a file of its own as a user's client would be.
fn inferencemax_with(tag: &str, entry: &str) -> rooftop::spec::client::ClientSpec {
    try_inferencemax_with(tag, entry).unwrap()
}

/// The error that loading the built-in InferenceMAX client with one more `[[launch]]` entry
/// (`entry`) gives, as text: the entry must be refused.
fn launch_refusal(tag: &str, entry: &str) -> String {
    try_inferencemax_with(tag, entry)
        .expect_err("the entry is refused")
        .to_string()
}

/// As [`inferencemax_with`], the load's error kept.
fn try_inferencemax_with(
    tag: &str,
    entry: &str,
) -> Result<rooftop::spec::client::ClientSpec, rooftop::error::Error> {
    let dir = std::env::temp_dir().join(format!("rooftop-launch-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("client.toml");
    let base = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/clients/inferencemax.toml"),
    )
    .unwrap();
    std::fs::write(&file, format!("{base}\n[[launch]]\n{entry}\n")).unwrap();
    let c = load_client(file.to_str().unwrap());
    std::fs::remove_dir_all(&dir).ok();
    c
}

fn w(input: u32, output: u32, client: ClientModel) -> Workload {
    Workload {
        input_len: input,
        output_len: output,
        tpot_def: TpotDef::Itl,
        client,
    }
}

#[test]
fn a_closed_loop_saturates_at_the_client_cap() {
    let m = load_model("llama-3.1-8b").unwrap();
    let s = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let client = load_client("aiohttp-default").unwrap().model();
    let r = sweep(&sc, &[64, 100, 128, 256], w(128, 512, client)).unwrap();
    assert_eq!(r.points[1].running, 100);
    assert_eq!(r.points[2].running, 100);
    assert_eq!(r.points[3].running, 100);
    let t = |i: usize| r.points[i].throughput_tok_s;
    assert!((t(2) - t(1)).abs() < 1e-9 * t(1) && (t(3) - t(1)).abs() < 1e-9 * t(1));
    assert!(t(0) < t(1));
    assert_eq!(r.limited_by[0], "client_connections");
}

#[test]
fn a_token_stream_bound_by_the_api_server_levels_off() {
    // The API server streams the tokens a step emits: one for each decoding sequence and
    // each prompt that finishes its prefill; requests still waiting for their prefill send
    // nothing. Its rate (1 / 20 us = 50,000 chunks/s here) then caps the throughput, which
    // more clients never lower. Before, the bound counted every running request: gpt-oss-120b
    // at C = 8,192 ran 8,192 x 20 us steps for 4,070 decoding, and throughput halved to 25,100
    // tok/s.
    let m = load_model("gpt-oss-120b").unwrap();
    let s = System::load("8x-b200-nvlink").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let client = load_client("inferencemax").unwrap().model();
    let r = sweep(&sc, &[1024, 2048, 4096, 8192], w(128, 128, client)).unwrap();
    let cap = 1.0 / 20e-6;
    for p in &r.points {
        assert!(
            p.throughput_tok_s <= cap * (1.0 + 1e-9),
            "C={}",
            p.concurrency
        );
    }
    for pair in r.points.windows(2) {
        assert!(
            pair[1].throughput_tok_s >= pair[0].throughput_tok_s * (1.0 - 1e-3),
            "C={}: {} after {} tok/s",
            pair[1].concurrency,
            pair[1].throughput_tok_s,
            pair[0].throughput_tok_s
        );
    }
    assert!(r.points[3].throughput_tok_s > 0.99 * cap);
}

#[test]
fn overlap_never_makes_a_step_slower() {
    let m = load_model("kimi-k2.5-int4").unwrap();
    for engine in ["vllm-v1", "sglang", "trtllm"] {
        for per_seq in ["0 us", "5 us", "200 us"] {
            let step = |overlap: bool| {
                let sets = [
                    format!("engine.cpu.overlap={overlap}"),
                    format!("engine.cpu.per_seq={per_seq}"),
                ]
                .map(|s| s.parse().unwrap());
                let s =
                    System::load_with_engine("8x-rtx-pro-6000-pcie", Some(engine), &sets).unwrap();
                let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
                let r = sweep(&sc, &[1, 16, 256], w(32, 256, ClientModel::IDEAL)).unwrap();
                r.points.iter().map(|p| p.tpot_itl_ms).collect::<Vec<_>>()
            };
            for (on, off) in step(true).iter().zip(step(false)) {
                assert!(
                    *on <= off * (1.0 + 1e-12),
                    "{engine} {per_seq}: {on} > {off}"
                );
            }
        }
    }
}

#[test]
fn a_burst_start_raises_mean_ttft_above_steady_state() {
    let m = load_model("llama-3.1-70b-fp8").unwrap();
    let s = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(4)).unwrap();
    for c in [4, 8, 64] {
        // A run of 4 waves: the first bursts at least.
        let burst = ClientModel {
            start: Start::Burst,
            num_prompts: Some(4 * c),
            ..ClientModel::IDEAL
        };
        let b = sweep(&sc, &[c], w(1024, 256, burst)).unwrap().points[0].clone();
        let st = sweep(&sc, &[c], w(1024, 256, ClientModel::IDEAL))
            .unwrap()
            .points[0]
            .clone();
        assert!(
            b.ttft_ms > st.ttft_ms,
            "C={c}: burst {} vs steady {}",
            b.ttft_ms,
            st.ttft_ms
        );
        assert!((b.ttft_steady_ms - st.ttft_ms).abs() < 1e-9 * st.ttft_ms);
    }
}

/// After the first wave of a burst, requests return in the groups one step prefilled
/// together: a group's TTFT is the step carrying all its prompts, so it grows with how many
/// prompts the token budget holds, and equals the steady state when one prompt fills it.
#[test]
fn later_waves_of_a_burst_arrive_in_groups_the_budget_sets() {
    let m = load_model("llama-3.1-70b-fp8").unwrap();
    let s = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(4)).unwrap();
    // So many prompts that the first wave's weight is negligible.
    let burst = ClientModel {
        start: Start::Burst,
        num_prompts: Some(u32::MAX),
        ..ClientModel::IDEAL
    };
    let ttft = |input: u32, c: u32| {
        let p = sweep(&sc, &[c], w(input, 512, burst)).unwrap().points[0].clone();
        (p.ttft_ms, p.ttft_steady_ms)
    };
    // vLLM's budget (8,192 tokens) holds ~8 prompts of 1,024: their group is slower than one.
    let (grouped, steady) = ttft(1024, 32);
    assert!(grouped > 3.0 * steady, "{grouped} vs {steady}");
    // A prompt that fills the budget by itself returns alone: steady state.
    let (alone, steady) = ttft(8192, 32);
    assert!(
        (alone - steady).abs() <= 1e-6 * steady,
        "{alone} vs {steady}"
    );
}

/// Drawn lengths finish apart: after the first wave requests arrive desynchronized, so a
/// run of many waves reports the steady state where fixed lengths report whole groups.
#[test]
fn varied_lengths_desynchronize_the_waves_after_the_first() {
    let m = load_model("llama-3.1-70b-fp8").unwrap();
    let s = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(4)).unwrap();
    let client = |lengths| ClientModel {
        start: Start::Burst,
        num_prompts: Some(u32::MAX),
        lengths,
        ..ClientModel::IDEAL
    };
    let p = |lengths| {
        sweep(&sc, &[32], w(1024, 512, client(lengths)))
            .unwrap()
            .points[0]
            .clone()
    };
    let (fixed, varied) = (p(Lengths::Fixed), p(Lengths::Varied));
    assert!(fixed.ttft_ms > 3.0 * varied.ttft_ms, "{fixed:?} {varied:?}");
    assert!((varied.ttft_ms - varied.ttft_steady_ms).abs() <= 1e-3 * varied.ttft_steady_ms);
}

/// A sweep that sends k x C prompts weights its first wave by 1/k at every C; a run of fixed
/// size weights it by C / num_prompts.
#[test]
fn the_first_wave_weighs_one_over_the_waves_a_run_sends() {
    let per_c = ClientModel {
        prompts_per_concurrency: Some(10),
        ..ClientModel::IDEAL
    };
    for c in [1, 4, 64, 512] {
        assert!((per_c.first_wave_share(c) - 0.1).abs() < 1e-12);
    }
    let fixed = ClientModel {
        num_prompts: Some(1000),
        ..ClientModel::IDEAL
    };
    assert!((fixed.first_wave_share(100) - 0.1).abs() < 1e-12);
    assert_eq!(fixed.first_wave_share(2000), 1.0);
    assert_eq!(ClientModel::IDEAL.first_wave_share(8), 0.0);
    // More waves per run never raise the mean TTFT of a burst start.
    let m = load_model("llama-3.1-70b-fp8").unwrap();
    let s = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(4)).unwrap();
    let mut last = f64::INFINITY;
    for k in [1, 2, 5, 10, 100] {
        let c = ClientModel {
            start: Start::Burst,
            prompts_per_concurrency: Some(k),
            ..ClientModel::IDEAL
        };
        let t = sweep(&sc, &[16], w(2048, 256, c)).unwrap().points[0].ttft_ms;
        assert!(t <= last * (1.0 + 1e-12), "k={k}: {t} > {last}");
        last = t;
    }
}

/// A client may give a run's size as a count or as a multiple of C, not both.
#[test]
fn a_client_with_both_run_sizes_is_refused() {
    let text = include_str!("../configs/clients/bench-serve-sweep.toml")
        .replace("num_prompts = 0", "num_prompts = 1000");
    let dir = std::env::temp_dir().join(format!("rooftop-client-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("both.toml");
    std::fs::write(&path, text).unwrap();
    let err = load_client(path.to_str().unwrap()).unwrap_err().to_string();
    assert!(err.contains("prompts_per_concurrency"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A prompt that arrives while the engine runs a step is scheduled when the step ends (half a
/// step on average); with overlap scheduling its first token leaves one step later still.
#[test]
fn a_busy_engine_adds_half_a_step_to_ttft_and_overlap_one_more() {
    let m = load_model("llama-3.1-8b").unwrap();
    let mut s = System::load("8x-h100-nvlink").unwrap();
    let prefill = {
        let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
        let ev = sc.evaluator().unwrap();
        ev.evaluate(&rooftop::cost::Pass::prefill(1.0, 1024.0, 0.0))
            .total
    };
    for overlap in [false, true] {
        s.engine.cpu.overlap = overlap;
        let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
        let p = sweep(&sc, &[1, 16], w(1024, 256, ClientModel::IDEAL)).unwrap();
        let busy = &p.points[1];
        let step = busy.tpot_itl_ms * 1e-3;
        let extra = if overlap { 1.5 } else { 0.5 };
        assert!(
            busy.ttft_ms * 1e-3 >= prefill.max(step) + extra * step - 1e-12,
            "overlap {overlap}: {} ms, prefill {prefill} s, step {step} s",
            busy.ttft_ms
        );
        // An idle engine takes the prompt at once.
        let idle = &p.points[0];
        let lag = if overlap { idle.tpot_itl_ms } else { 0.0 };
        assert!(idle.ttft_ms - lag < 1.5 * prefill * 1e3, "{idle:?}");
    }
}

#[test]
fn ttft_at_one_request_is_its_prefill() {
    let m = load_model("llama-3.1-8b").unwrap();
    let s = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let r = sweep(&sc, &[1], w(65536, 1, ClientModel::IDEAL)).unwrap();
    let ev = sc.evaluator().unwrap();
    let chunks = (65536.0f64 / s.engine.max_num_batched_tokens as f64).ceil();
    let prefill = ev
        .evaluate(&rooftop::cost::Pass::prefill(1.0, 65536.0, 0.0))
        .total;
    // Chunked: each chunk a step; never the 10x the old queue term produced.
    assert!(
        r.points[0].ttft_ms * 1e-3 < 2.0 * prefill + chunks * 1e-3,
        "{:?}",
        r.points[0].ttft_ms
    );
}

#[test]
fn a_configuration_that_does_not_fit_is_refused() {
    let m = load_model("deepseek-v3-fp8").unwrap();
    let s = System::load("8x-rtx-5090-pcie").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let e = sweep(&sc, &[1, 8], w(1000, 1000, ClientModel::IDEAL))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("does not fit:"), "{e}");
}

#[test]
fn a_closed_loop_obeys_littles_law() {
    // C clients each with one request in flight: C × output tokens per end-to-end time,
    // whatever the prefill queue does, short outputs (prefill-bound) included.
    for (m, sys, tp) in [
        ("llama-3.1-8b", "8x-h100-nvlink", 8),
        ("kimi-k2.5-int4", "8x-rtx-pro-6000-pcie", 8),
        ("qwen3-30b-a3b", "8x-l40s-pcie", 4),
    ] {
        let model = load_model(m).unwrap();
        let s = System::load(sys).unwrap();
        let sc = Scenario::new(&model, &s, Parallel::tp(tp)).unwrap();
        for (i, o) in [(1000, 2), (1000, 32), (128, 512)] {
            let r = sweep(&sc, &[1, 4, 16, 64, 256], w(i, o, ClientModel::IDEAL)).unwrap();
            let alone = r.points[0].e2e_ms;
            for p in &r.points {
                let little = p.concurrency as f64 * o as f64 / p.throughput_tok_s * 1e3;
                assert!(
                    (little - p.e2e_ms).abs() <= 1e-9 * p.e2e_ms,
                    "{m} {i}/{o} C={}: C·output/throughput {little} ms, e2e {} ms",
                    p.concurrency,
                    p.e2e_ms
                );
                // C requests served one after another is the slowest a loop can be: a
                // queue of prompts never takes longer than running them in turn.
                assert!(
                    p.e2e_ms <= p.concurrency as f64 * alone * (1.0 + 1e-9),
                    "{m} {i}/{o} C={}: e2e {} ms beyond {} requests in turn ({alone} ms each)",
                    p.concurrency,
                    p.e2e_ms,
                    p.concurrency
                );
            }
        }
    }
}

#[test]
fn ttft_never_falls_as_load_rises() {
    // Pipeline parallelism overlaps stages across the sequences of a step; one prompt still
    // crosses every stage, so more load never makes its first token come sooner (it fell
    // by 55 % from C = 2 to C = 8 before the prompt's chunk was priced as one sequence's).
    // A prompt longer than the token budget is prefilled in full chunks and a remainder:
    // split into equal parts instead, a 32,768-token prompt went from 4 chunks of 8,192 at
    // C = 1 to 5 of 6,554 at C = 2 (a decode took one token of the room) and its TTFT fell
    // from 153.8 to 137.8 ms (8 x B200, TP8).
    let m = load_model("llama-3.1-8b").unwrap();
    let never_falls = |sc: &Scenario, concurrency: &[u32], i: u32, o: u32| {
        let r = sweep(sc, concurrency, w(i, o, ClientModel::IDEAL)).unwrap();
        for pair in r.points.windows(2) {
            assert!(
                pair[1].ttft_ms >= pair[0].ttft_ms * (1.0 - 1e-9),
                "{} {i}/{o}: TTFT fell from {} ms at C={} to {} ms at C={}",
                sc.parallel,
                pair[0].ttft_ms,
                pair[0].concurrency,
                pair[1].ttft_ms,
                pair[1].concurrency
            );
        }
    };
    let b200 = System::load("8x-b200-nvlink").unwrap();
    let sc = Scenario::new(&m, &b200, Parallel::tp(8)).unwrap();
    never_falls(&sc, &[1, 2, 3, 4, 8, 16], 32768, 256);
    let s = System::load("8x-h100-nvlink").unwrap();
    for layout in [
        Parallel {
            pp: 8,
            ..Parallel::tp(1)
        },
        Parallel::tp(8),
        Parallel {
            pp: 4,
            ..Parallel::tp(2)
        },
    ] {
        let sc = Scenario::new(&m, &s, layout).unwrap();
        for (i, o) in [(2000, 500), (128, 32)] {
            never_falls(&sc, &[1, 2, 4, 8, 16, 64], i, o);
        }
    }
}

/// InferenceMAX's launch scripts set SGLang's poll interval for DeepSeek-R1 and Qwen3.5 on
/// one node (10 below C = 16, 30 from it) and nothing for other engines, models or
/// multi-node systems.
#[test]
fn a_harness_launch_script_sets_the_poll_interval_it_names() {
    let c = load_client("inferencemax").unwrap();
    let on =
        |system: &str, engine: &str| System::load_with_engine(system, Some(engine), &[]).unwrap();
    let b200 = on("8x-b200-nvlink", "sglang");
    let r = c
        .model_for(&b200, &model("qwen3.5-397b-a17b"))
        .recv_intervals;
    assert_eq!(
        (r.at(4), r.at(15), r.at(16), r.at(512)),
        (Some(10), Some(10), Some(30), Some(30))
    );
    assert_eq!(
        c.model_for(
            &on("8x-b200-nvlink", "sglang@0.5.9"),
            &model("deepseek-v3-fp8")
        )
        .recv_intervals
        .at(8),
        Some(10)
    );
    for (system, engine, model) in [
        ("8x-b200-nvlink", "sglang", "glm-5-nvfp4"),
        ("8x-b200-nvlink", "vllm-v1", "deepseek-v3-fp8"),
        ("4x8-b200-ib", "sglang", "deepseek-v3-fp8"),
    ] {
        let r = c
            .model_for(&on(system, engine), &self::model(model))
            .recv_intervals;
        assert_eq!(r.at(32), None, "{engine} {model} on {system}");
    }
}

/// A launch script that selects a fused-MoE library (`[[launch]] moe_library`, as vLLM's
/// `VLLM_MXFP4_USE_MARLIN=1` does): the engine it starts runs that library's constants for
/// the format, only where the entry's engine, model, architecture and releases hold.
#[test]
fn a_harness_launch_script_selects_the_moe_library_it_names() {
    let c = inferencemax_with(
        "marlin",
        "engine = \"vllm-v1\"\nmodels = [\"gpt-oss-120b\"]\narch = \"SM90\"\nfrom = \"0.13\"\n\
         moe_library = { mxfp4 = \"marlin\" }",
    );
    let on =
        |system: &str, engine: &str| System::load_with_engine(system, Some(engine), &[]).unwrap();
    for engine in ["vllm-v1@0.18.0", "vllm-v1"] {
        let s = c.launched(&on("8x-h100-nvlink", engine), &model("gpt-oss-120b"));
        let libs = s.map(|s| s.engine.moe_library).unwrap_or_default();
        assert_eq!(
            libs.get("mxfp4").map(String::as_str),
            Some("marlin"),
            "{engine}"
        );
    }
    for (system, engine, model) in [
        ("8x-h100-nvlink", "vllm-v1@0.11.2", "gpt-oss-120b"),
        ("8x-b200-nvlink", "vllm-v1@0.18.0", "gpt-oss-120b"),
        ("8x-h100-nvlink", "vllm-v1@0.18.0", "deepseek-v3-fp8"),
        ("8x-h100-nvlink", "sglang", "gpt-oss-120b"),
    ] {
        assert!(
            c.launched(&on(system, engine), &self::model(model))
                .is_none(),
            "{engine} {model} on {system}"
        );
    }
    // The built-in client selects nothing.
    let builtin = load_client("inferencemax").unwrap();
    assert!(builtin
        .launched(
            &on("8x-h100-nvlink", "vllm-v1@0.18.0"),
            &model("gpt-oss-120b")
        )
        .is_none());
    // Marlin's constants are the ones priced: its mma.sync prefill is slower than Triton's.
    let m = load_model("gpt-oss-120b").unwrap();
    let plain = on("8x-h100-nvlink", "vllm-v1@0.18.0");
    let marlin = c.launched(&plain, &model("gpt-oss-120b")).unwrap();
    let prefill = |sys: &System| {
        use rooftop::cost::{CostParams, Evaluator, Pass};
        Evaluator::new(&m, sys, Parallel::tp(2), CostParams::default_for(sys))
            .unwrap()
            .step_time(&Pass::prefill(1.0, 8192.0, 0.0))
    };
    let (p, q) = (prefill(&plain), prefill(&marlin));
    assert!(q > 1.2 * p, "Marlin prefill {q} s vs Triton {p} s");
}

/// An engine that names a fused-MoE library its GPU's generation has no constants for is
/// refused with the file to add them to, never priced with another library's.
#[test]
fn an_engine_naming_an_unknown_moe_library_is_refused() {
    use rooftop::cost::{CostParams, Evaluator};
    let m = load_model("gpt-oss-120b").unwrap();
    let mut s = System::load_with_engine("8x-h100-nvlink", Some("vllm-v1"), &[]).unwrap();
    s.engine
        .moe_library
        .insert("mxfp4".into(), "no-such-library".into());
    let e = match Evaluator::new(&m, &s, Parallel::tp(2), CostParams::default_for(&s)) {
        Ok(_) => panic!("an unknown library is priced"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("no-such-library") && e.contains("hopper.toml"),
        "{e}"
    );
}

/// A scheduler that polls every N decode steps keeps a prompt sent mid-stretch waiting: TTFT
/// grows with N, by about N / 2 steps, and no step gets longer (the longer cycle starts
/// fewer prompts per step).
#[test]
fn polling_less_often_adds_to_ttft_and_not_to_the_step() {
    let m = load_model("llama-3.1-8b").unwrap();
    let mut s = System::load("8x-h100-nvlink").unwrap();
    let mut last: Option<(f64, f64)> = None;
    for n in [1, 10, 30] {
        s.engine.scheduler_recv_interval = n;
        let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
        let p = sweep(&sc, &[16], w(1024, 256, ClientModel::IDEAL)).unwrap();
        let (ttft, step) = (p.points[0].ttft_ms, p.points[0].tpot_itl_ms);
        if let Some((t0, s0)) = last {
            assert!(ttft > t0, "N={n}: {ttft} ms not above {t0} ms");
            assert!(step <= s0 * (1.0 + 1e-9), "N={n}: step {step} above {s0}");
        }
        if n == 30 {
            let one = last.unwrap().0;
            // From N = 10 to 30 the wait grows by 10 steps.
            assert!(
                (ttft - one - 10.0 * step).abs() <= step,
                "{ttft} {one} {step}"
            );
        }
        last = Some((ttft, step));
    }
}

/// A poll interval of 0 steps, or a launch entry whose concurrencies end before they begin,
/// is refused by name.
#[test]
fn an_impossible_poll_interval_is_refused() {
    let text = include_str!("../configs/clients/inferencemax.toml").replacen(
        "scheduler_recv_interval = 10",
        "scheduler_recv_interval = 0",
        1,
    );
    let dir = std::env::temp_dir().join(format!("rooftop-launch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("zero.toml");
    std::fs::write(&path, text).unwrap();
    let err = load_client(path.to_str().unwrap()).unwrap_err().to_string();
    assert!(err.contains("launch[0].scheduler_recv_interval"), "{err}");
    let text = include_str!("../configs/clients/inferencemax.toml").replacen(
        "min_concurrency = 16",
        "min_concurrency = 16\nmax_concurrency = 8",
        1,
    );
    std::fs::write(&path, text).unwrap();
    let err = load_client(path.to_str().unwrap()).unwrap_err().to_string();
    assert!(err.contains("launch[1].max_concurrency"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
    let mut s = System::load("8x-h100-nvlink").unwrap();
    s.engine.scheduler_recv_interval = 0;
    assert!(s.engine.validate().is_err());
}

/// InferenceMAX's scripts set the KV cache to FP8 for SGLang DeepSeek-R1 and Qwen3.5 FP8 on
/// one node and vLLM gpt-oss-120b on B200: the model those runs are priced with stores FP8,
/// and nothing else changes (Qwen3.5's BF16 checkpoint, another engine, several nodes,
/// Hopper, an older release); TensorRT-LLM's DeepSeek-R1 and B200 gpt-oss-120b scripts set
/// FP8 too.
#[test]
fn a_harness_launch_script_sets_the_kv_cache_it_names() {
    use rooftop::spec::KvDtype;
    let c = load_client("inferencemax").unwrap();
    let on =
        |system: &str, engine: &str| System::load_with_engine(system, Some(engine), &[]).unwrap();
    let kv = |system: &str, engine: &str, m: &rooftop::spec::ModelSpec| {
        let mut m = m.clone();
        c.launch_model(&on(system, engine), &mut m);
        m.quantization.kv_cache
    };
    let with_default = |name: &str, format: Option<&str>| {
        let mut m = model(name);
        if let Some(f) = format {
            m.quantization.default = f.parse().unwrap();
        }
        m
    };
    use KvDtype::{Bf16, Fp8};
    // (system, engine, model, its checkpoint's default format where not the built-in's,
    // the cache the launched run stores, why).
    let cases = [
        (
            "8x-b200-nvlink",
            "sglang",
            "deepseek-v3-fp8",
            None,
            Fp8,
            "SGLang's script",
        ),
        (
            "4x8-b200-ib",
            "sglang",
            "deepseek-v3-fp8",
            None,
            Bf16,
            "another recipe runs multi-node",
        ),
        (
            "8x-b200-nvlink",
            "vllm-v1",
            "deepseek-v3-fp8",
            None,
            Bf16,
            "no vLLM script",
        ),
        (
            "8x-b200-nvlink",
            "trtllm",
            "deepseek-v3-fp8",
            None,
            Fp8,
            "TensorRT-LLM's B200 script",
        ),
        (
            "8x-h200-nvlink",
            "trtllm",
            "deepseek-v3-fp8",
            None,
            Fp8,
            "TensorRT-LLM's H200 script",
        ),
        (
            "4x8-b200-ib",
            "trtllm",
            "deepseek-v3-fp8",
            None,
            Bf16,
            "multi-node",
        ),
        (
            "8x-b200-nvlink",
            "trtllm",
            "gpt-oss-120b",
            None,
            Fp8,
            "TensorRT-LLM's B200 script",
        ),
        (
            "8x-h100-nvlink",
            "trtllm",
            "gpt-oss-120b",
            None,
            Bf16,
            "its H200 script keeps auto",
        ),
        (
            "8x-b200-nvlink",
            "vllm-v1@0.19.0",
            "minimax-m2.5-fp8",
            None,
            Fp8,
            "from the v0.19.0 image",
        ),
        (
            "8x-b200-nvlink",
            "vllm-v1@0.17.0",
            "minimax-m2.5-fp8",
            None,
            Bf16,
            "before it",
        ),
        (
            "8x-b200-nvlink",
            "vllm-v1@0.17.0",
            "minimax-m2.5-fp8",
            Some("nvfp4"),
            Fp8,
            "the NVFP4 script",
        ),
        (
            "8x-b200-nvlink",
            "vllm-v1@0.15.1",
            "gpt-oss-120b",
            None,
            Fp8,
            "from the v0.11.2 scripts",
        ),
        (
            "8x-b200-nvlink",
            "vllm-v1@0.10.2",
            "gpt-oss-120b",
            None,
            Bf16,
            "before them",
        ),
        (
            "8x-h100-nvlink",
            "vllm-v1@0.18.0",
            "gpt-oss-120b",
            None,
            Bf16,
            "Hopper",
        ),
        (
            "8x-b200-nvlink",
            "sglang",
            "qwen3.5-397b-a17b",
            None,
            Bf16,
            "BF16 checkpoint",
        ),
        (
            "8x-b200-nvlink",
            "sglang",
            "qwen3.5-397b-a17b",
            Some("fp8"),
            Fp8,
            "FP8 checkpoint",
        ),
    ];
    for (system, engine, name, format, want, why) in cases {
        let m = with_default(name, format);
        assert_eq!(
            kv(system, engine, &m),
            want,
            "{engine} {name} {format:?} on {system}: {why}"
        );
    }
}

/// A launch entry that names its checkpoint (`weights`) sets the engine's library only for
/// runs of that checkpoint: the same model name at another default format is left alone.
#[test]
fn a_launch_entry_naming_its_checkpoint_applies_to_that_checkpoint_only() {
    let c = inferencemax_with(
        "weights",
        "engine = \"sglang\"\nmodels = [\"qwen3.5-397b-a17b\"]\nweights = [\"fp8\"]\n\
         moe_library = { fp8-block = \"cutlass\" }",
    );
    let s = System::load_with_engine("8x-h100-nvlink", Some("sglang"), &[]).unwrap();
    let bf16 = model("qwen3.5-397b-a17b");
    let mut fp8 = bf16.clone();
    fp8.quantization.default = "fp8".parse().unwrap();
    assert!(c.launched(&s, &bf16).is_none());
    let launched = c.launched(&s, &fp8).expect("the FP8 checkpoint's launch");
    assert_eq!(
        launched
            .engine
            .moe_library
            .get("fp8-block")
            .map(String::as_str),
        Some("cutlass")
    );
}

/// InferenceMAX's TensorRT-LLM DeepSeek-R1 scripts turn on context balancing over the
/// attention-DP ranks (timeout 60 iterations, no batching wait): the engine they start holds
/// it, on one node only and for TensorRT-LLM only. Under attention DP over 8 ranks at
/// C = 128 it lengthens the mean TTFT (prompts wait for the ranks' counter), and it leaves
/// a tensor-parallel layout, which has one attention rank, exactly as it was.
#[test]
fn a_harness_launch_script_turns_on_context_balancing_under_attention_dp() {
    let c = load_client("inferencemax").unwrap();
    let on =
        |system: &str, engine: &str| System::load_with_engine(system, Some(engine), &[]).unwrap();
    let m = model("deepseek-v3-fp8");
    let plain = on("8x-b200-nvlink", "trtllm");
    let launched = c
        .launched(&plain, &m)
        .expect("the script changes the engine");
    let b = launched.engine.attention_dp_balance.expect("balancing on");
    assert_eq!((b.timeout_iters, b.batching_wait_iters), (60, 0));
    for (system, engine) in [("8x-b200-nvlink", "sglang"), ("4x8-b200-ib", "trtllm")] {
        let s = on(system, engine);
        let after = c.launched(&s, &m).unwrap_or(s);
        assert_eq!(
            after.engine.attention_dp_balance, None,
            "{engine} on {system}"
        );
    }
    let client = c.model_for(&launched, &m);
    let ttft = |s: &System, p: Parallel| {
        let sc = Scenario::new(&m, s, p).unwrap();
        sweep(&sc, &[128], w(1024, 1024, client)).unwrap().points[0].ttft_ms
    };
    let dp = Parallel {
        tp: 1,
        ep: 8,
        pp: 1,
        dp: 8,
        redundant_experts: 0,
    };
    let (held, free) = (ttft(&launched, dp), ttft(&plain, dp));
    assert!(held > free * 1.5, "balanced {held} ms against {free} ms");
    let tp = Parallel::tp(8);
    assert_eq!(ttft(&launched, tp), ttft(&plain, tp));
}

/// A launch entry's balancing settings are checked like the engine's: a timeout beyond the
/// bound is refused with the entry's field named.
#[test]
fn a_launch_entrys_balancing_timeout_is_bounded() {
    let err = launch_refusal(
        "balance",
        "engine = \"trtllm\"\nattention_dp_balance = { timeout_iters = 20000 }",
    );
    assert!(err.contains("attention_dp_balance.timeout_iters"), "{err}");
}

/// InferenceMAX's MiniMax-M2.5 FP8 script on B200 sets the token budget to twice the input
/// length from the v0.19.0 image on: 2,048 tokens a step at 1,024 input tokens, so a burst's
/// first wave of 64 prompts takes four times the steps it takes at vLLM's 8,192, each paying
/// the step's fixed costs, and its mean TTFT grows; an older release keeps the engine's
/// budget. A multiple of 0 is refused.
#[test]
fn a_harness_launch_script_sets_the_token_budget_from_the_input_length() {
    let c = load_client("inferencemax").unwrap();
    let m = model("minimax-m2.5-fp8");
    let ttft = |engine: &str| {
        let s = System::load_with_engine("8x-b200-nvlink", Some(engine), &[]).unwrap();
        let client = c.model_for(&s, &m);
        let sc = Scenario::new(&m, &s, Parallel::tp(2)).unwrap();
        (
            client.budget_per_input,
            sweep(&sc, &[64], w(1024, 1024, client)).unwrap().points[0].ttft_ms,
        )
    };
    let (new, old) = (ttft("vllm-v1@0.19.0"), ttft("vllm-v1@0.17.0"));
    assert_eq!((new.0, old.0), (Some(2), None));
    assert!(
        new.1 > old.1,
        "budget 2,048: {} ms, 8,192: {} ms",
        new.1,
        old.1
    );
    let err = launch_refusal(
        "budget",
        "engine = \"vllm-v1\"\nmax_num_batched_tokens_per_input = 0",
    );
    assert!(err.contains("max_num_batched_tokens_per_input"), "{err}");
}

/// InferenceMAX's SGLang scripts set the prefill budget (`--chunked-prefill-size` with
/// `--max-prefill-tokens`): 32,768 for DeepSeek-R1 FP8 and Qwen3.5 on B200, 16,384 for
/// Qwen3.5 FP8 on H200; the FP4 DeepSeek-R1 script keeps the B200 default of 16,384. A
/// budget of 0 is refused.
#[test]
fn a_harness_launch_script_sets_the_prefill_budget_it_names() {
    let c = load_client("inferencemax").unwrap();
    let budget = |system: &str, name: &str, format: Option<&str>| {
        let s = System::load_with_engine(system, Some("sglang"), &[]).unwrap();
        let mut m = model(name);
        if let Some(f) = format {
            m.quantization.default = f.parse().unwrap();
        }
        let own = s.engine.max_num_batched_tokens;
        (
            c.launched(&s, &m)
                .map_or(own, |l| l.engine.max_num_batched_tokens),
            own,
        )
    };
    assert_eq!(
        budget("8x-b200-nvlink", "deepseek-v3-fp8", None),
        (32768, 16384)
    );
    assert_eq!(
        budget("8x-b200-nvlink", "deepseek-v3-fp8", Some("nvfp4")),
        (16384, 16384)
    );
    assert_eq!(budget("8x-b200-nvlink", "qwen3.5-397b-a17b", None).0, 32768);
    assert_eq!(
        budget("8x-h200-nvlink", "qwen3.5-397b-a17b", Some("fp8")).0,
        16384
    );
    assert_eq!(budget("4x8-b200-ib", "deepseek-v3-fp8", None).0, 16384);
    let err = launch_refusal(
        "zero-budget",
        "engine = \"sglang\"\nmax_num_batched_tokens = 0",
    );
    assert!(
        err.contains("launch[") && err.contains("max_num_batched_tokens"),
        "{err}"
    );
}

/// InferenceMAX's TensorRT-LLM Llama-3.1-70B scripts on B200 turn on batch waiting
/// (timeout 20 iterations, 0.9 of the budget) at 1k/1k below TP 8 and set a 16,384-token
/// budget at every shape. At TP 4 and C = 4 a prompt sent while the other three decode waits
/// out the timeout: the mean TTFT grows by about 20 decode steps (the first wave, sent into
/// an idle engine, is never held), and the TPOT barely moves. At TP 8, at another request
/// shape, or with data-parallel attention nothing is held.
#[test]
fn a_harness_launch_script_turns_on_batch_waiting_for_its_shapes_and_layouts() {
    let c = load_client("inferencemax").unwrap();
    let m = model("llama-3.1-70b-fp8");
    let plain = System::load_with_engine("8x-b200-nvlink", Some("trtllm"), &[]).unwrap();
    let launched = c.launched(&plain, &m).expect("the script sets the budget");
    assert_eq!(launched.engine.max_num_batched_tokens, 16_384);
    let held = c.model_for(&launched, &m);
    let free = ClientModel {
        batch_waits: rooftop::spec::client::BatchWaits::NONE,
        ..held
    };
    let point = |p: Parallel, input: u32, output: u32, client: ClientModel| {
        let sc = Scenario::new(&m, &launched, p).unwrap();
        sweep(&sc, &[4], w(input, output, client)).unwrap().points[0].clone()
    };
    let (a, b) = (
        point(Parallel::tp(4), 1024, 1024, held),
        point(Parallel::tp(4), 1024, 1024, free),
    );
    let steps = (a.ttft_ms - b.ttft_ms) / b.decode_step_ms;
    assert!(
        (14.0..=20.0).contains(&steps),
        "{:.1} decode steps more ({} against {} ms)",
        steps,
        a.ttft_ms,
        b.ttft_ms
    );
    assert!((a.tpot_ms - b.tpot_ms).abs() <= 0.02 * b.tpot_ms);
    for (p, input, output) in [
        (Parallel::tp(8), 1024, 1024),
        (Parallel::tp(4), 1024, 8192),
        (Parallel::tp(4), 8192, 1024),
    ] {
        assert_eq!(
            point(p, input, output, held).ttft_ms,
            point(p, input, output, free).ttft_ms,
            "tp{} {input}/{output}",
            p.tp
        );
    }
    let dp = Parallel {
        tp: 1,
        ep: 1,
        pp: 1,
        dp: 4,
        redundant_experts: 0,
    };
    assert_eq!(
        point(dp, 1024, 1024, held).ttft_ms,
        point(dp, 1024, 1024, free).ttft_ms
    );
}

/// The engine's own batch waiting (an engine TOML's `[batch_wait]`) holds a steady closed
/// loop's prompts too: the TTFT rises, by no more than the timeout's steps (by all of them
/// at C = 2, where a prompt rarely has company), and never past the others' last decode; a
/// timeout of 0 holds nothing. (The wait may shorten as the load rises: more prompts reach
/// the token threshold sooner.)
#[test]
fn an_engines_batch_waiting_holds_a_closed_loops_prompts() {
    let m = model("llama-3.1-8b");
    let base = System::load_with_engine("8x-h100-nvlink", Some("trtllm"), &[]).unwrap();
    let with = |timeout: u32| {
        let mut s = base.clone();
        s.engine.batch_wait = Some(rooftop::spec::engine::BatchWait {
            timeout_iters: timeout,
            max_tokens_ratio: 0.9,
        });
        s
    };
    let run = |s: &System| {
        let sc = Scenario::new(&m, s, Parallel::tp(1)).unwrap();
        sweep(&sc, &[2, 8, 32, 128], w(1024, 512, ClientModel::IDEAL)).unwrap()
    };
    let (free, held, none) = (run(&base), run(&with(30)), run(&with(0)));
    for ((f, h), n) in free.points.iter().zip(&held.points).zip(&none.points) {
        assert_eq!(f.ttft_ms, n.ttft_ms, "C={}", f.concurrency);
        assert!(
            h.ttft_ms > f.ttft_ms,
            "C={}: {} vs {}",
            f.concurrency,
            h.ttft_ms,
            f.ttft_ms
        );
        assert!(
            h.ttft_ms - f.ttft_ms <= 30.0 * h.tpot_ms * 1.05,
            "C={}: {} ms more, beyond 30 steps of {} ms",
            f.concurrency,
            h.ttft_ms - f.ttft_ms,
            h.tpot_ms
        );
    }
    // At C = 2 a window rarely gathers a second prompt: the whole timeout, within 10 %.
    let (f, h) = (&free.points[0], &held.points[0]);
    let steps = (h.ttft_ms - f.ttft_ms) / h.tpot_ms;
    assert!(
        (27.0..=30.0 * 1.01).contains(&steps),
        "C=2: {steps:.1} steps held"
    );
    // A timeout longer than a request holds a prompt only until the others stop decoding:
    // never more than their `output − 1` steps, and the throughput stays above one request's.
    let long = run(&with(10_000));
    for (f, h) in free.points.iter().zip(&long.points) {
        let steps = (h.ttft_ms - f.ttft_ms) / h.tpot_ms;
        assert!(steps <= 511.0, "C={}: {steps:.0} steps held", f.concurrency);
    }
    assert!(long.points[0].throughput_tok_s > free.points[0].throughput_tok_s * 0.6);
}

/// A launch entry's batch waiting is checked: a ratio above the whole budget is refused
/// with its field named, and request lengths or a TP bound qualify batch waiting alone.
#[test]
fn a_launch_entrys_batch_waiting_is_checked() {
    let err = launch_refusal(
        "bwratio",
        "engine = \"trtllm\"\nbatch_wait = { timeout_iters = 20, max_tokens_ratio = 1.5 }",
    );
    assert!(err.contains("batch_wait.max_tokens_ratio"), "{err}");
    let err = launch_refusal(
        "bwshape",
        "engine = \"trtllm\"\ninput_len = 1024\nmax_num_batched_tokens = 4096",
    );
    assert!(err.contains("only with batch_wait"), "{err}");
}
