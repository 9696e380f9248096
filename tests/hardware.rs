//! The NVIDIA parts people compare against: A100 (SXM, PCIe), L4, H20, B300 and GB300, their
//! systems, and what each does with a weight format its tensor cores lack.

use rooftop::cost::generation::Generation;
use rooftop::cost::{CostParams, Device, Evaluator, Parallel, Pass};
use rooftop::predict::{predict, Scenario};
use rooftop::spec::registry::{builtin_names, load_gpu, load_model, Kind};
use rooftop::spec::{FormatKind, MathDtype, System};

const NEW_GPUS: [&str; 6] = ["a100-sxm", "a100-pcie", "l4", "h20", "b300", "gb300"];
const NEW_SYSTEMS: [&str; 4] = [
    "8x-a100-nvlink",
    "8x-h20-nvlink",
    "8x-b300-nvlink",
    "8x-l4-pcie",
];

#[test]
fn new_gpus_load_with_power_and_sources_and_map_to_a_generation() {
    for name in NEW_GPUS {
        let g = load_gpu(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(g.board_power.is_some(), "{name}: board_power");
        let idle = g.idle_power.unwrap_or_else(|| panic!("{name}: idle_power"));
        assert!(idle.0 < g.board_power.unwrap().0, "{name}");
        for field in [
            "memory_bandwidth",
            "dense_peak",
            "board_power",
            "idle_power",
        ] {
            assert!(g.sources.contains_key(field), "{name}: sources.{field}");
        }
        let expected = match name {
            "a100-sxm" | "a100-pcie" => Generation::Ampere,
            "l4" => Generation::Ada,
            "h20" => Generation::Hopper,
            _ => Generation::BlackwellSm100,
        };
        assert_eq!(Generation::of(&g).unwrap(), expected, "{name}");
    }
    // Blackwell Ultra is compute capability 10.3, not 10.0, and runs the SM100 kernels.
    assert_eq!(load_gpu("b300").unwrap().compute_capability(), Some(103));
    // Ampere has no FP8 or FP4 tensor cores, and says so by leaving the peaks out.
    for name in ["a100-sxm", "a100-pcie"] {
        let g = load_gpu(name).unwrap();
        assert!(g.peak(MathDtype::Fp8).is_none() && g.peak(MathDtype::Fp4).is_none());
        assert!(g.peak(MathDtype::Int8).is_some());
    }
}

/// Every built-in model runs on each new system, or the error says why: it does not fit,
/// or the engine refuses the layout.
#[test]
fn builtin_models_run_on_new_systems_or_say_why_not() {
    for s in NEW_SYSTEMS {
        let sys = System::load(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        let mut ran = 0;
        for m in builtin_names(Kind::Model) {
            let model = load_model(m).unwrap();
            let out = Scenario::new(&model, &sys, Parallel::tp(8)).and_then(|sc| {
                let p = predict(&sc, 8, 2048)?;
                p.memory.fits.then_some(p).ok_or_else(|| {
                    rooftop::error::Error::Scenario("does not fit at this point".into())
                })
            });
            match out {
                Ok(p) => {
                    assert!(p.tpot_ms.is_finite() && p.tpot_ms > 0.0, "{m} on {s}");
                    assert!(p.sol_tpot_ms <= p.tpot_ms, "{m} on {s}");
                    ran += 1;
                }
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        e.contains("fit") || e.contains("cannot run") || e.contains("divide"),
                        "{m} on {s}: an error that names no reason: {e}"
                    );
                }
            }
        }
        assert!(ran >= 3, "{s}: only {ran} built-in models run");
    }
}

/// On Ampere an FP8 or FP4 checkpoint runs weight-only: its GEMMs multiply at the BF16 peak
/// through a kernel that does not quantize the activations, never at an FP8 or FP4 rate.
#[test]
fn fp8_and_fp4_on_a100_run_weight_only_at_the_bf16_peak() {
    let sys = System::load("8x-a100-nvlink").unwrap();
    let dev = Device::new(&sys, CostParams::default_for(&sys)).unwrap();
    let bf16 = sys.gpu.peak(MathDtype::Bf16).unwrap().0;
    for f in [FormatKind::Fp8, FormatKind::Nvfp4, FormatKind::Mxfp4] {
        assert_eq!(dev.gemm_math[f], MathDtype::Bf16, "{f:?}");
        assert_eq!(dev.gemm_peak[f], bf16, "{f:?}");
    }
    let k = Generation::Ampere.kernels();
    for key in ["fp8", "fp8-block", "nvfp4", "mxfp4"] {
        let g = &k.gemm[key];
        assert!(!g.quantize_activations, "[gemm.{key}] must be weight-only");
        assert!(g.kernel.contains("Marlin"), "[gemm.{key}]: {}", g.kernel);
        assert!(k.moe[key].kernel.contains("Marlin"), "[moe.{key}]");
    }
    // The FP8 70B runs, and its GEMMs are bound by the BF16 peak: the speed of light of a
    // compute-bound prefill is no faster than the BF16 70B's.
    let fp8 = load_model("llama-3.1-70b-fp8").unwrap();
    let bf = load_model("llama-3.1-70b").unwrap();
    let sol = CostParams::speed_of_light();
    let step = |m| {
        Evaluator::new(m, &sys, Parallel::tp(8), sol)
            .unwrap()
            .step_time(&Pass::prefill(8.0, 4096.0, 0.0))
    };
    let (t_fp8, t_bf16) = (step(&fp8), step(&bf));
    assert!(
        t_fp8 >= 0.99 * t_bf16,
        "FP8 prefill {t_fp8} s vs BF16 {t_bf16} s: an FP8 rate was priced"
    );
}

/// A format whose only GEMM quantizes the activations to a dtype the GPU lacks is refused,
/// with the format, the GPU and the missing dtype named; never priced at some other peak.
#[test]
fn a_format_needing_missing_tensor_cores_is_refused_by_name() {
    let mut sys = System::load("8x-h100-nvlink").unwrap();
    sys.gpu.dense_peak.fp8 = None; // a Hopper-generation part described without FP8
    let model = load_model("llama-3.1-70b-fp8").unwrap();
    let Err(err) = Scenario::new(&model, &sys, Parallel::tp(8)) else {
        panic!("an FP8 W8A8 GEMM was priced on a GPU without FP8 tensor cores");
    };
    let err = err.to_string();
    for word in ["fp8", "FP8", "h100-sxm", "dense_peak.fp8", "hopper.toml"] {
        assert!(err.contains(word), "`{word}` missing from: {err}");
    }
    // The BF16 model on the same GPU is not affected.
    let bf = load_model("llama-3.1-70b").unwrap();
    assert!(Scenario::new(&bf, &sys, Parallel::tp(8)).is_ok());
}

/// vLLM's batch defaults leave the A100 out of the large-GPU rule (get_batch_defaults:
/// >= 70 GiB and not an A100): the 80 GB A100 gets 256 sequences, the 96 GB H20 1,024.
#[test]
fn vllm_batch_defaults_leave_the_a100_out() {
    assert_eq!(
        System::load("8x-a100-nvlink").unwrap().engine.max_num_seqs,
        256
    );
    assert_eq!(
        System::load("8x-h20-nvlink").unwrap().engine.max_num_seqs,
        1024
    );
}

fn decode_tpot(model: &str, system: &str, batch: f64) -> f64 {
    let m = load_model(model).unwrap();
    let s = System::load(system).unwrap();
    Evaluator::new(&m, &s, Parallel::tp(8), CostParams::default_for(&s))
        .unwrap()
        .step_time(&Pass::decode(batch, 2048.0))
}

/// Physics across generations at one layout: an A100 (2.0 TB/s) never decodes a BF16 model
/// faster than an H100 (3.35 TB/s) with more of everything; a B300 (the B200's bandwidth and
/// fabric, more FP4 and SMs) never slower than a B200.
#[test]
fn newer_parts_are_never_slower_at_the_same_layout() {
    for m in ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "mixtral-8x7b"] {
        for b in [1.0, 16.0] {
            let (a100, h100) = (
                decode_tpot(m, "8x-a100-nvlink", b),
                decode_tpot(m, "8x-h100-nvlink", b),
            );
            assert!(a100 >= h100, "{m} b={b}: A100 {a100} s < H100 {h100} s");
        }
    }
    for m in [
        "llama-3.1-70b",
        "glm-5-nvfp4",
        "kimi-k2.5-int4",
        "gpt-oss-120b",
    ] {
        for b in [1.0, 64.0] {
            let (b300, b200) = (
                decode_tpot(m, "8x-b300-nvlink", b),
                decode_tpot(m, "8x-b200-nvlink", b),
            );
            assert!(
                b300 <= b200 * 1.0001,
                "{m} b={b}: B300 {b300} s > B200 {b200} s"
            );
        }
    }
}
