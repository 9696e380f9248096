//! DeepEP's MoE dispatch and combine (`engine.moe_all_to_all`, src/cost/collective.rs
//! `expert_exchange`): low-latency mode sends every token-expert pair, normal mode one copy
//! per destination rank or node; NVLink inside a node, each GPU's NIC across nodes. The
//! physics: a call is never faster than its bytes at the links' raw rates, a faster NIC or
//! NVLink never slows one, more tokens or more skew never speed one up, normal mode moves no
//! more bytes than low-latency mode, and `deepep-auto` runs low-latency kernels for decode and
//! normal ones for prefill. The NCCL default moves nothing (the golden file holds it).
//!
//! EPLB's redundant experts (`--redundant-experts`, `re` in a layout): each group holds more
//! expert slots (their weights are held), replicas of the busiest experts placed as
//! DeepSeek's EPLB places them. Under balanced routing they are pure overhead; under skewed
//! routing they bring the busiest rank toward the mean.

mod common;

use rooftop::cost::collective::{self, AllReduceAlgo};
use rooftop::cost::memory::weight_bytes_per_gpu;
use rooftop::cost::CostParams;
use rooftop::ops::routing::eplb_busiest;
use rooftop::ops::scenario::Pass;
use rooftop::ops::{DeepEpMode, ExpertExchange, Op, Parallel};
use rooftop::predict::Scenario;
use rooftop::spec::registry::load_model;
use rooftop::spec::System;

use common::load_system as load;

const SYSTEMS: [&str; 4] = [
    "8x-h200-nvlink",
    "2x8-h200-ib",
    "4x8-b200-ib",
    "8x-rtx-pro-6000-pcie",
];

/// DeepSeek-V3's routing: 256 experts, top 8, hidden 7,168 (BF16 payload).
fn exchange(mode: DeepEpMode, tokens: f64, ranks: u32) -> ExpertExchange {
    ExpertExchange {
        mode,
        tokens,
        token_bytes: 7168.0 * 2.0,
        experts: 256.0,
        top_k: 8.0,
        ranks,
        skew: 1.0,
    }
}

/// Sixteen data-parallel attention replicas, one expert group per GPU.
const WIDE_EP: Parallel = Parallel {
    tp: 1,
    ep: 16,
    pp: 1,
    dp: 16,
    redundant_experts: 0,
};

fn groups(sys: &System) -> Vec<u32> {
    let g = sys.spec.gpu_count;
    [2, 4, 8, 16, 32]
        .into_iter()
        .filter(|n| *n <= g && 256 % n == 0)
        .collect()
}

fn tokens() -> impl Iterator<Item = f64> {
    (0..=12).map(|i| 2f64.powi(i))
}

#[test]
fn never_faster_than_its_bytes_at_the_raw_link_rates() {
    for name in SYSTEMS {
        let sys = load(name, &[]);
        let p = CostParams::default_for(&sys);
        let sol = CostParams::speed_of_light();
        for n in groups(&sys) {
            for mode in [DeepEpMode::LowLatency, DeepEpMode::Normal] {
                for t in tokens() {
                    let x = exchange(mode, t, n);
                    let c = collective::expert_exchange(&sys, &x, &p);
                    let ideal = collective::expert_exchange(&sys, &x, &sol);
                    assert!(
                        c.time().is_finite() && c.time() > 0.0,
                        "{name} {mode:?} {t} x {n}"
                    );
                    assert!(
                        c.time() >= ideal.time() * (1.0 - 1e-12),
                        "{name} {mode:?}: {t} tokens over {n} GPUs in {:.2} us, under its \
                         speed of light {:.2} us",
                        c.time() * 1e6,
                        ideal.time() * 1e6
                    );
                    assert_ne!(c.algo, AllReduceAlgo::None);
                }
            }
        }
    }
}

#[test]
fn more_tokens_or_more_skew_never_take_less_time() {
    for name in SYSTEMS {
        let sys = load(name, &[]);
        let p = CostParams::default_for(&sys);
        for n in groups(&sys) {
            for mode in [DeepEpMode::LowLatency, DeepEpMode::Normal] {
                let mut last = 0.0;
                for t in tokens() {
                    let c = collective::expert_exchange(&sys, &exchange(mode, t, n), &p).time();
                    assert!(c >= last * (1.0 - 1e-12), "{name} {mode:?} {t} x {n}");
                    last = c;
                    let skewed = ExpertExchange {
                        skew: 1.7,
                        ..exchange(mode, t, n)
                    };
                    let s = collective::expert_exchange(&sys, &skewed, &p).time();
                    assert!(s >= c * (1.0 - 1e-12), "{name} {mode:?} skew {t} x {n}");
                }
            }
        }
    }
}

/// Normal mode sends a token once per destination rank (node, across the network); the
/// low-latency mode once per expert: at the same payload it never moves more over either
/// link, so at large batches (bandwidth-bound) it is never slower.
#[test]
fn normal_mode_deduplicates_what_low_latency_mode_sends() {
    for name in SYSTEMS {
        let sys = load(name, &[]);
        let p = CostParams::default_for(&sys);
        for n in groups(&sys) {
            let t = 4096.0;
            let ll = collective::expert_exchange(&sys, &exchange(DeepEpMode::LowLatency, t, n), &p);
            let normal = collective::expert_exchange(&sys, &exchange(DeepEpMode::Normal, t, n), &p);
            assert!(
                normal.transfer <= ll.transfer * (1.0 + 1e-12),
                "{name}: {n} GPUs, normal {:.1} us of transfer over low-latency {:.1} us",
                normal.transfer * 1e6,
                ll.transfer * 1e6
            );
            // Its notify round and host wait cost more fixed time.
            assert!(normal.latency > ll.latency, "{name}: {n} GPUs");
        }
    }
}

#[test]
fn faster_links_never_slow_an_exchange() {
    for (name, set) in [
        ("2x8-h200-ib", "system.nodes.nic_rate=\"800 Gb/s\""),
        ("4x8-b200-ib", "system.nodes.nic_rate=\"800 Gb/s\""),
        ("8x-h200-nvlink", "interconnect.bandwidth=\"1800 GB/s\""),
    ] {
        let slow = load(name, &[]);
        let fast = load(name, &[set]);
        let (ps, pf) = (
            CostParams::default_for(&slow),
            CostParams::default_for(&fast),
        );
        for n in groups(&slow) {
            for mode in [DeepEpMode::LowLatency, DeepEpMode::Normal] {
                for t in tokens() {
                    let x = exchange(mode, t, n);
                    let a = collective::expert_exchange(&slow, &x, &ps).time();
                    let b = collective::expert_exchange(&fast, &x, &pf).time();
                    assert!(b <= a * (1.0 + 1e-12), "{name} {set}: {mode:?} {t} x {n}");
                }
            }
        }
    }
}

/// Across nodes the network carries what leaves the node: a group of two nodes takes longer
/// than one node's group with the same tokens per GPU (each token has more remote experts).
#[test]
fn crossing_the_network_costs_more_than_nvlink() {
    for name in ["2x8-h200-ib", "4x8-b200-ib"] {
        let sys = load(name, &[]);
        let p = CostParams::default_for(&sys);
        let g = sys.spec.gpus_per_node();
        for mode in [DeepEpMode::LowLatency, DeepEpMode::Normal] {
            for t in tokens() {
                let one = collective::expert_exchange(&sys, &exchange(mode, t, g), &p);
                let two = collective::expert_exchange(&sys, &exchange(mode, t, 2 * g), &p);
                assert!(
                    two.time() > one.time(),
                    "{name} {mode:?} {t}: two nodes {:.2} us, one {:.2} us",
                    two.time() * 1e6,
                    one.time() * 1e6
                );
            }
        }
    }
}

/// The MoE layer's ops under each backend: `deepep-auto` runs low-latency kernels for a
/// decode step and normal ones for a prefill; the breakdown still sums to the total; the
/// default (NCCL) keeps its all-to-all. A layout whose experts do not give every GPU its own
/// is refused.
#[test]
fn the_engine_backend_picks_the_kernels_per_pass() {
    let model = load_model("deepseek-v3-fp8").unwrap();
    let par = WIDE_EP;
    let kinds = |backend: &str, pass: Pass| -> Vec<String> {
        let set = format!("engine.moe_all_to_all={backend}");
        let sys = load("2x8-h200-ib", &[set.as_str()]);
        let s = Scenario::new(&model, &sys, par).unwrap();
        let ev = s.evaluator().unwrap();
        let r = ev.evaluate(&pass);
        let parts: f64 = r.breakdown.0.iter().sum();
        assert!((parts - r.total).abs() <= 1e-9 * r.total, "{backend}");
        r.operators()
            .into_iter()
            .filter(|(_, o, _, _)| o.name == "moe_dispatch")
            .map(|(_, o, c, _)| {
                let mode = match o.op {
                    Op::ExpertExchange(x) => format!("{:?}", x.mode),
                    _ => "nccl".into(),
                };
                format!("{mode}/{}", c.algorithm.map_or("", |a| a.name()))
            })
            .collect()
    };
    let decode = Pass::decode(256.0, 2048.0);
    let prefill = Pass::prefill(16.0, 1024.0, 0.0);
    let auto_decode = kinds("deepep-auto", decode);
    assert!(!auto_decode.is_empty());
    assert!(
        auto_decode
            .iter()
            .all(|k| k == "LowLatency/deepep-low-latency"),
        "{auto_decode:?}"
    );
    let auto_prefill = kinds("deepep-auto", prefill);
    assert!(
        auto_prefill.iter().all(|k| k == "Normal/deepep-normal"),
        "{auto_prefill:?}"
    );
    let nccl = kinds("nccl", decode);
    assert!(
        nccl.iter().all(|k| k.starts_with("nccl/nccl-p2p")),
        "{nccl:?}"
    );

    let e = common::failure_of(&[
        "predict",
        "--model",
        "deepseek-v3-fp8",
        "--system",
        "8x-h200-nvlink",
        "--tp",
        "2",
        "--ep",
        "4",
        "--dp",
        "4",
        "--set",
        "engine.moe_all_to_all=deepep-auto",
    ]);
    assert!(e.contains("ep must equal tp × dp"), "{e}");
}

/// Skewed routing loads the busiest rank's links: a power-law router's exchange takes at
/// least as long as a balanced one's.
#[test]
fn routing_skew_loads_the_busiest_rank() {
    let model = load_model("deepseek-v3-fp8").unwrap();
    let par = WIDE_EP;
    let alltoall = |routing: Option<&str>| {
        let sys = load("2x8-h200-ib", &["engine.moe_all_to_all=deepep-low-latency"]);
        let mut m = model.clone();
        if let Some(r) = routing {
            m.routing = r.parse().unwrap();
        }
        let s = Scenario::new(&m, &sys, par).unwrap();
        let r = s
            .evaluator()
            .unwrap()
            .evaluate(&Pass::decode(2048.0, 2048.0));
        r.breakdown.get(rooftop::ops::category::Category::Alltoall)
    };
    let balanced = alltoall(None);
    let skewed = alltoall(Some("power-law 1.2"));
    assert!(balanced > 0.0);
    assert!(
        skewed > balanced,
        "skewed {skewed} s, balanced {balanced} s"
    );
}

fn with_redundant(r: u32) -> Parallel {
    Parallel {
        redundant_experts: r,
        ..WIDE_EP
    }
}

/// Routed-expert time per step on the busiest rank (all MoE layers).
fn routed_experts(model: &rooftop::spec::ModelSpec, par: Parallel, batch: f64) -> f64 {
    let sys = load("2x8-h200-ib", &[]);
    let s = Scenario::new(model, &sys, par).unwrap();
    let r = s
        .evaluator()
        .unwrap()
        .evaluate(&Pass::decode(batch, 2048.0));
    r.operators()
        .into_iter()
        .filter(|(_, o, _, _)| o.name == "routed_experts")
        .map(|(_, _, c, n)| c.time * n as f64)
        .sum()
}

/// EPLB's placement: the busiest rank carries at least the mean and at most the mean plus
/// the largest replica (the greedy packing's bound), and the replicas hold every token.
#[test]
fn eplb_places_replicas_between_the_mean_and_one_replica_above_it() {
    for (e, ep) in [(256usize, 16usize), (384, 32), (128, 8), (64, 64)] {
        // Power-law loads, largest first.
        let x: Vec<f64> = (0..e)
            .map(|i| 1000.0 / (1.0 + i as f64).powf(1.2))
            .collect();
        let total: f64 = x.iter().sum();
        let mean = total / ep as f64;
        for r in 0..=3usize {
            let slots = e / ep + r;
            let mine = eplb_busiest(&x, ep, slots);
            assert_eq!(
                mine.len(),
                slots,
                "{e} experts on {ep}: a rank fills its slots"
            );
            let load: f64 = mine.iter().sum();
            let largest = mine.iter().cloned().fold(0.0, f64::max);
            assert!(
                load >= mean * (1.0 - 1e-12),
                "{e}/{ep} r {r}: {load} under the mean {mean}"
            );
            assert!(
                load <= mean + largest + 1e-9,
                "{e}/{ep} r {r}: {load} over the mean {mean} plus a replica {largest}"
            );
        }
    }
}

#[test]
fn redundant_slots_hold_their_weights() {
    let model = load_model("deepseek-v3-fp8").unwrap();
    let moe = model.moe().unwrap();
    let base = weight_bytes_per_gpu(&model, &WIDE_EP);
    let one = weight_bytes_per_gpu(&model, &with_redundant(1));
    let two = weight_bytes_per_gpu(&model, &with_redundant(2));
    // One more expert per MoE layer on each GPU: 3 x hidden x expert width FP8 weights, with
    // their block scales.
    let layers =
        (model.config.num_hidden_layers - model.config.first_k_dense_replace.unwrap_or(0)) as f64;
    let expert = 3.0 * model.config.hidden_size as f64 * moe.expert_intermediate as f64;
    let step = one - base;
    assert!(step > 0.0);
    assert!(
        (two - one - step).abs() <= 1e-6 * step,
        "each slot adds the same weights"
    );
    let per_weight = step / (layers * expert);
    assert!(
        (1.0..1.05).contains(&per_weight),
        "FP8 experts: {per_weight} bytes per weight"
    );
}

/// Balanced routing has nothing to balance: replicas only add weights to read. Skewed routing
/// concentrates tokens on a few experts, and one replica slot per group brings the busiest
/// rank's experts closer to the balanced time.
#[test]
fn replicas_cost_under_balanced_routing_and_pay_under_skew() {
    let model = load_model("deepseek-v3-fp8").unwrap();
    for batch in [16.0, 256.0, 2048.0] {
        let mut last = 0.0;
        for r in 0..=4 {
            let t = routed_experts(&model, with_redundant(r), batch);
            assert!(
                t >= last * (1.0 - 1e-12),
                "balanced, batch {batch}, {r} slots"
            );
            last = t;
        }
    }
    let mut skewed = model.clone();
    skewed.routing = "power-law 1.2".parse().unwrap();
    let balanced = routed_experts(&model, WIDE_EP, 2048.0);
    let none = routed_experts(&skewed, WIDE_EP, 2048.0);
    let one = routed_experts(&skewed, with_redundant(1), 2048.0);
    assert!(none > balanced, "skew costs time: {none} s vs {balanced} s");
    assert!(
        one < none,
        "one replica slot per group: {one} s vs {none} s without"
    );
    assert!(
        one >= balanced * (1.0 - 1e-12),
        "never better than balanced: {one} vs {balanced}"
    );
}

#[test]
fn redundant_experts_read_and_refuse_as_a_layout() {
    let p: Parallel = "tp1ep16dp16re2".parse().unwrap();
    assert_eq!(p, with_redundant(2));
    assert_eq!(p.to_string(), "tp1ep16dp16re2");
    assert_eq!(WIDE_EP.to_string(), "tp1ep16dp16");
    const WIDE: [&str; 6] = ["--tp", "1", "--ep", "16", "--dp", "16"];
    let predict = |more: &[&str]| -> Vec<String> {
        [
            "predict",
            "--model",
            "deepseek-v3-fp8",
            "--system",
            "2x8-h200-ib",
        ]
        .iter()
        .chain(more)
        .map(|a| a.to_string())
        .collect()
    };
    let args = predict(&[&WIDE[..], &["--redundant-experts", "2", "--format", "json"]].concat());
    let json = common::json_of(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(json["parallel"], "tp1ep16dp16re2", "{json}");
    for (more, why) in [
        (
            vec!["--tp", "8", "--redundant-experts", "1"],
            "need expert parallelism",
        ),
        (
            [&WIDE[..], &["--redundant-experts", "17"]].concat(),
            "at most one replica slot",
        ),
    ] {
        let all = predict(&more);
        let e = common::failure_of(&all.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(e.contains(why), "{all:?}: {e}");
    }
    let e = common::failure_of(&[
        "predict",
        "--model",
        "llama-3.1-8b",
        "--system",
        "8x-h100-nvlink",
        "--redundant-experts",
        "1",
    ]);
    assert!(e.contains("need a model with experts"), "{e}");
}

/// A data-parallel group is one GPU of each replica, `tp` apart: over two nodes of 8, four
/// replicas of TP4 put two of the group's GPUs in each node, so its all-gather crosses the
/// network where a packed group of four would not, with two of each node's NICs.
#[test]
fn a_strided_group_spans_the_nodes_its_gpus_lie_in() {
    let sys = load("2x8-h200-ib", &[]);
    assert!(collective::strided_system(&sys, 4, 1).is_none());
    assert!(
        collective::strided_system(&sys, 2, 4).is_none(),
        "ranks 0 and 4 share a node"
    );
    let wide = collective::strided_system(&sys, 4, 4).expect("ranks 0, 4, 8, 12 span both nodes");
    assert_eq!(wide.spec.gpus_per_node(), 2);
    assert_eq!(wide.spec.nodes_spanned(4), 2);
    assert_eq!(wide.spec.nodes.unwrap().nics_per_node, 2);
    let p = CostParams::default_for(&sys);
    for b in (10..=30).map(|i| 2f64.powi(i)) {
        let packed = collective::all_gather(&sys, b, 4, &p).time();
        let strided = collective::all_gather(&wide, b, 4, &p).time();
        assert!(strided >= packed * (1.0 - 1e-12), "{b} B");
    }
}

/// vLLM's all-gather/reduce-scatter backend: the dispatch all-gathers over the
/// data-parallel group, the combine reduce-scatters, and a replica of TP > 1 all-reduces its
/// GPUs' experts after it; the breakdown still sums to the total.
#[test]
fn allgather_reducescatter_runs_over_the_data_parallel_group() {
    let model = load_model("deepseek-v3-fp8").unwrap();
    let sys = load(
        "2x8-h200-ib",
        &["engine.moe_all_to_all=allgather-reducescatter"],
    );
    for (tp, dp) in [(1, 16), (4, 4), (2, 8)] {
        let par = Parallel {
            tp,
            ep: 16,
            pp: 1,
            dp,
            redundant_experts: 0,
        };
        let s = Scenario::new(&model, &sys, par).unwrap();
        let r = s
            .evaluator()
            .unwrap()
            .evaluate(&Pass::decode(256.0, 2048.0));
        let parts: f64 = r.breakdown.0.iter().sum();
        assert!((parts - r.total).abs() <= 1e-9 * r.total);
        let ops = r.operators();
        let shape = |name: &str| {
            ops.iter()
                .find(|(_, o, _, _)| o.name == name)
                .map(|(_, o, _, _)| o.op)
        };
        match shape("moe_dispatch") {
            Some(Op::Collective { ranks, stride, .. }) => {
                assert_eq!((ranks, stride), (dp, tp), "tp{tp} dp{dp}")
            }
            other => panic!("tp{tp} dp{dp}: dispatch {other:?}"),
        }
        assert!(shape("moe_combine").is_some());
        assert_eq!(shape("allreduce_moe").is_some(), tp > 1, "tp{tp} dp{dp}");
    }
}

/// Where the dispatch is an all-to-all (NCCL's or DeepEP's), each GPU's fused-MoE call is
/// handed only the pairs routed to its experts: at a fixed batch per GPU, a wider expert
/// group never slows the routed experts (each GPU holds fewer experts and the same share
/// of pairs). Before, the call was priced as handed every replica's tokens, as under an
/// all-gather, and its passes over all pairs grew with the group: DeepSeek-V3 on GB200
/// NVL72 at 64 sequences per GPU read 203 us per call at EP 16 and 364 us at EP 64. Under
/// an all-gather (vLLM's allgather_reducescatter) the call is still handed every token.
#[test]
fn a_wider_all_to_all_expert_group_never_slows_the_routed_experts() {
    let model = load_model("deepseek-v3-fp8").unwrap();
    let per_call = |sets: &[&str], ep: u32| {
        let sys = load("gb200-nvl72", sets);
        let par = Parallel {
            tp: 1,
            ep,
            pp: 1,
            dp: ep,
            redundant_experts: 0,
        };
        let s = Scenario::new(&model, &sys, par).unwrap();
        let r = s
            .evaluator()
            .unwrap()
            .evaluate(&Pass::decode(64.0 * ep as f64, 2048.0));
        let (_, _, c, _) = r
            .operators()
            .into_iter()
            .find(|(_, o, _, _)| o.name == "routed_experts")
            .expect("a routed-expert call");
        (c.time, c.bytes)
    };
    for sets in [
        &["engine.moe_all_to_all=nccl"][..],
        &["engine.moe_all_to_all=deepep-low-latency"][..],
    ] {
        let mut last = f64::INFINITY;
        for ep in [8, 16, 32, 64] {
            let (t, _) = per_call(sets, ep);
            assert!(
                t <= last * (1.0 + 1e-9),
                "{sets:?} ep {ep}: {t} s after {last} s"
            );
            last = t;
        }
    }
    // Handed every token, the call's pair traffic grows with the tokens of the group.
    let gather = &["engine.moe_all_to_all=allgather-reducescatter"][..];
    let a2a = &["engine.moe_all_to_all=nccl"][..];
    let (_, b_gather) = per_call(gather, 64);
    let (_, b_a2a) = per_call(a2a, 64);
    assert!(
        b_gather > b_a2a,
        "all-gather {b_gather} B, all-to-all {b_a2a} B"
    );
}
