//! DeepEP's MoE dispatch and combine (`engine.moe_all_to_all`, src/cost/collective.rs
//! `expert_exchange`): low-latency mode sends every token-expert pair, normal mode one copy
//! per destination rank or node; NVLink inside a node, each GPU's NIC across nodes. The
//! physics: a call is never faster than its bytes at the links' raw rates, a faster NIC or
//! NVLink never slows one, more tokens or more skew never speed one up, normal mode moves no
//! more bytes than low-latency mode, and `deepep-auto` runs low-latency kernels for decode and
//! normal ones for prefill. The NCCL default moves nothing (the golden file holds it).

mod common;

use rooftop::cost::collective::{self, AllReduceAlgo};
use rooftop::cost::CostParams;
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
