//! AMD Instinct parts (MI300X, MI325X: CDNA3 gfx942; MI355X: CDNA4 gfx950) and their 8-GPU
//! xGMI boards: every description loads and picks its generation; `predict`, `sweep` and
//! `compare` run on the built-in models, or refuse them naming why (memory, a format the
//! engine has no ROCm kernel for); a format is priced at the math the part has; collectives
//! over n GPUs of the fully connected mesh use only the n - 1 links among them, one link per
//! pair, and a faster link never slows one.

use assert_cmd::Command;

mod common;
use rooftop::cost::collective::{self, mesh_links};
use rooftop::cost::generation::Generation;
use rooftop::cost::CostParams;
use rooftop::ops::Parallel;
use rooftop::predict::{predict_fitting, Scenario};
use rooftop::spec::registry::{builtin_names, load_gpu, load_model, Kind};
use rooftop::spec::{MathDtype, System, Topology};

const SYSTEMS: [&str; 3] = ["8x-mi300x", "8x-mi325x", "8x-mi355x"];

use common::load_system as load;

#[test]
fn every_amd_gpu_and_system_loads_with_its_generation() {
    for (gpu, generation, cus) in [
        ("mi300x", Generation::Cdna3, 304),
        ("mi325x", Generation::Cdna3, 304),
        ("mi355x", Generation::Cdna4, 256),
    ] {
        let g = load_gpu(gpu).unwrap();
        assert_eq!(Generation::of(&g).unwrap(), generation, "{gpu}");
        assert_eq!(g.sm_count, Some(cus), "{gpu}: compute units");
        assert!(g.board_power.is_some() && g.idle_power.is_some(), "{gpu}");
        // dense peaks only; FP4 only where the matrix cores have it (CDNA4)
        assert_eq!(g.peak(MathDtype::Fp4).is_some(), gpu == "mi355x", "{gpu}");
        let fp8 = g.peak(MathDtype::Fp8).unwrap().0;
        let bf16 = g.peak(MathDtype::Bf16).unwrap().0;
        assert!((fp8 / bf16 - 2.0).abs() < 1e-3, "{gpu}: FP8 twice BF16");
    }
    for name in SYSTEMS {
        let s = load(name, &[]);
        assert_eq!(s.spec.topology, Topology::FullMesh, "{name}");
        assert_eq!(s.spec.gpu_count, 8, "{name}");
        assert!(builtin_names(Kind::System).contains(&name));
    }
}

/// Every built-in model on every AMD box at TP8 either predicts finite, positive times or is
/// refused with a reason that says why: it does not fit, its layout does not divide, or its
/// weights are in a format vLLM has no ROCm kernel for.
#[test]
fn predict_runs_on_the_built_in_models_or_names_why_not() {
    let mut ran = 0;
    for name in SYSTEMS {
        let sys = load(name, &[]);
        for m in builtin_names(Kind::Model) {
            let model = load_model(m).unwrap();
            let result = Scenario::new(&model, &sys, Parallel::tp(8))
                .and_then(|s| predict_fitting(&s, 8, 2048));
            match result {
                Ok(p) => {
                    assert!(
                        p.tpot_ms.is_finite() && p.tpot_ms > 0.0 && p.tpot_ms >= p.sol_tpot_ms,
                        "{m} on {name}: TPOT {} ms, SOL {} ms",
                        p.tpot_ms,
                        p.sol_tpot_ms
                    );
                    ran += 1;
                }
                Err(e) => {
                    let e = e.to_string();
                    let named = e.contains("does not fit")
                        || e.contains("does not divide")
                        || e.contains("do not divide")
                        || e.contains("not a multiple")
                        || e.contains("[refused]");
                    assert!(named, "{m} on {name} refused without a reason: {e}");
                }
            }
        }
    }
    assert!(ran >= 20, "only {ran} model/system pairs ran");
}

/// NVFP4 has no vLLM kernel on ROCm: refused on both generations, naming the format, the GPU
/// and the reason, never priced at another format's kernel.
#[test]
fn nvfp4_is_refused_naming_format_gpu_and_reason() {
    let model = load_model("glm-5-nvfp4").unwrap();
    for name in SYSTEMS {
        let sys = load(name, &[]);
        let e = Scenario::new(&model, &sys, Parallel::tp(8))
            .err()
            .unwrap_or_else(|| panic!("NVFP4 on {name} was not refused"))
            .to_string();
        assert!(e.contains("nvfp4"), "{e}");
        assert!(e.contains(&sys.gpu.full_name), "{e}");
        assert!(e.contains("ROCm"), "{e}");
    }
    let out = Command::cargo_bin("rooftop")
        .unwrap()
        .args([
            "op", "gemm", "--gpu", "mi355x", "--m", "16", "--n", "4096", "--k", "4096",
        ])
        .args(["--dtype", "nvfp4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[refused]"));
}

/// FP8 runs at the FP8 rate on both generations (e4m3fnuz on CDNA3, converted at load time);
/// MXFP4 experts run in BF16 math on CDNA3 (no FP4 matrix cores) and against the FP4 peak on
/// CDNA4.
#[test]
fn formats_are_priced_at_the_math_the_part_has() {
    let fp8 = load_model("llama-3.1-70b-fp8").unwrap();
    let oss = load_model("gpt-oss-120b").unwrap();
    for (name, mxfp4_math) in [
        ("8x-mi300x", MathDtype::Bf16),
        ("8x-mi355x", MathDtype::Fp4),
    ] {
        let sys = load(name, &[]);
        let s = Scenario::new(&fp8, &sys, Parallel::tp(8)).unwrap();
        let p = predict_fitting(&s, 8, 1024).unwrap();
        assert!(
            p.ops.iter().any(|o| o.math == Some(MathDtype::Fp8)),
            "{name}: no FP8 GEMM"
        );
        let s = Scenario::new(&oss, &sys, Parallel::tp(8)).unwrap();
        let p = predict_fitting(&s, 8, 1024).unwrap();
        let moe: Vec<_> = p
            .ops
            .iter()
            .filter(|o| o.block == "moe" && o.math.is_some())
            .collect();
        assert!(!moe.is_empty(), "{name}: no MoE op");
        assert!(
            moe.iter().any(|o| o.math == Some(mxfp4_math)),
            "{name}: MXFP4 experts not in {mxfp4_math:?} math: {:?}",
            moe.iter().map(|o| o.math).collect::<Vec<_>>()
        );
    }
}

/// Bus bandwidth of an all-reduce of `bytes` over `n` GPUs: `2 (n - 1) / n · S / t`.
fn allreduce_bus(sys: &System, bytes: f64, n: u32, p: &CostParams) -> f64 {
    let nf = n as f64;
    2.0 * (nf - 1.0) / nf * bytes / collective::allreduce(sys, bytes, n, p).time()
}

fn sizes() -> Vec<f64> {
    (0..=100)
        .map(|i| 1024.0 * 2f64.powf(i as f64 / 5.0))
        .collect()
}

/// Two GPUs of the mesh share one link: their all-reduce never beats it; n GPUs never beat
/// their n - 1 links; all-gather, reduce-scatter and all-to-all likewise, at default and
/// speed-of-light parameters alike.
#[test]
fn collectives_respect_the_xgmi_link_count() {
    for name in SYSTEMS {
        for sets in [&[][..], &["system.cuda_graphs=false"][..]] {
            let sys = load(name, sets);
            let link = sys.link.bandwidth_per_direction.0;
            for p in [CostParams::default_for(&sys), CostParams::speed_of_light()] {
                for n in 2..=8u32 {
                    let nf = n as f64;
                    let links = nf - 1.0;
                    assert_eq!(mesh_links(&sys, n), links);
                    for b in sizes() {
                        let bus = allreduce_bus(&sys, b, n, &p);
                        assert!(
                            bus <= links * link * (1.0 + 1e-9),
                            "{name} {sets:?}: all-reduce of {b} B over {n} GPUs at {:.1} GB/s \
                             bus bandwidth, over {links} links of {:.1} GB/s",
                            bus / 1e9,
                            link / 1e9
                        );
                        for (family, c, bytes) in [
                            (
                                "all-gather",
                                collective::all_gather(&sys, b, n, &p),
                                links * b,
                            ),
                            (
                                "reduce-scatter",
                                collective::reduce_scatter(&sys, b, n, &p),
                                links / nf * b,
                            ),
                            (
                                "all-to-all",
                                collective::all_to_all(&sys, b, n, &p),
                                links / nf * b,
                            ),
                        ] {
                            assert!(
                                c.time() >= bytes / (links * link) * (1.0 - 1e-12),
                                "{name}: {family} of {b} B over {n} GPUs beats {links} links"
                            );
                        }
                    }
                }
                // a send between two GPUs crosses their one link
                let b = 64e6;
                assert!(collective::send_recv(&sys, b, &p).time() >= b / link * (1.0 - 1e-12));
            }
        }
    }
}

/// A large 8-GPU all-reduce runs RCCL's ring at (n - 1) links × the link's bus fraction; a
/// 2-GPU one at one link's.
#[test]
fn large_allreduce_approaches_the_links_among_its_gpus() {
    for name in SYSTEMS {
        let sys = load(name, &[]);
        let p = CostParams::default_for(&sys);
        let per_link = sys.link.bandwidth_per_direction.0
            * collective::model(&sys.link).bus_fraction.switch.0
            * p.link_efficiency;
        for n in [2u32, 4, 8] {
            let expected = (n as f64 - 1.0) * per_link;
            let bus = allreduce_bus(&sys, 1024.0 * 1024.0 * 1024.0, n, &p);
            assert!(
                bus <= expected * 1.0001 && bus >= 0.9 * expected,
                "{name}: 1 GiB all-reduce over {n} GPUs at {:.1} GB/s bus bandwidth, expected \
                 about {:.1} GB/s ({} links)",
                bus / 1e9,
                expected / 1e9,
                n - 1
            );
        }
    }
}

/// More link bandwidth never slows a collective, nor a decode step.
#[test]
fn a_faster_link_never_slows_anything() {
    for name in SYSTEMS {
        let base = load(name, &[]);
        let raw = base.link.bandwidth_per_direction.0;
        let faster = format!(
            "interconnect.bandwidth_per_direction={} GB/s",
            2.0 * raw / 1e9
        );
        let fast = load(name, &[faster.as_str()]);
        for n in 2..=8u32 {
            for b in sizes() {
                for (a, f) in [
                    (
                        collective::allreduce(&base, b, n, &CostParams::default_for(&base)),
                        collective::allreduce(&fast, b, n, &CostParams::default_for(&fast)),
                    ),
                    (
                        collective::all_to_all(&base, b, n, &CostParams::default_for(&base)),
                        collective::all_to_all(&fast, b, n, &CostParams::default_for(&fast)),
                    ),
                ] {
                    assert!(
                        f.time() <= a.time() * (1.0 + 1e-12),
                        "{name}: {b} B over {n} GPUs slower on a faster link"
                    );
                }
            }
        }
        let model = load_model("qwen3-30b-a3b").unwrap();
        let tpot = |sys: &System| {
            let s = Scenario::new(&model, sys, Parallel::tp(8)).unwrap();
            predict_fitting(&s, 64, 2048).unwrap().tpot_ms
        };
        assert!(
            tpot(&fast) <= tpot(&base) * (1.0 + 1e-12),
            "{name}: decode slower on a faster link"
        );
    }
}

/// `predict`, `sweep` and `compare` run on the AMD boxes from the command line.
#[test]
fn predict_sweep_and_compare_run_on_amd() {
    let run = common::stdout_of;
    let p = run(&[
        "predict",
        "--model",
        "llama-3.1-70b-fp8",
        "--system",
        "8x-mi300x",
    ]);
    assert!(p.contains("8x-mi300x"), "{p}");
    let s = run(&["sweep", "--model", "gpt-oss-120b", "--system", "8x-mi355x"]);
    assert!(!s.is_empty());
    let c = run(&[
        "compare",
        "--model",
        "llama-3.1-70b",
        "--systems",
        "8x-mi300x,8x-mi325x,8x-mi355x,8x-h200-nvlink",
    ]);
    assert!(
        c.contains("8x-mi325x") && c.contains("8x-h200-nvlink"),
        "{c}"
    );
}
