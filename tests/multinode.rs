//! Systems of several nodes: the built-ins load with their node layout, and collectives that
//! span nodes are priced as NCCL runs them over the NICs (src/cost/collective.rs, "Across
//! nodes"). A collective across nodes is never faster than the same collective inside one
//! node, more nodes never make one faster, a faster NIC never slows one, and a large
//! all-reduce where the NICs bind lands just under their line rate. Layouts larger than one
//! node run end to end.

mod common;

use rooftop::cost::collective::{self, AllReduceAlgo};
use rooftop::cost::CostParams;
use rooftop::ops::Parallel;
use rooftop::predict::Scenario;
use rooftop::spec::overrides::parse_all;
use rooftop::spec::registry::{builtin_names, load_model, Kind};
use rooftop::spec::System;

use common::COLLECTIVES as FAMILIES;

const MULTI_NODE: [&str; 4] = ["2x8-h100-ib", "2x8-h200-ib", "4x8-b200-ib", "8x8-b200-ib"];

use common::load_system as load;

/// 1 KiB to 4 GiB by factors of 2^(1/4).
fn sizes() -> Vec<f64> {
    (0..=88)
        .map(|i| 1024.0 * 2f64.powf(i as f64 / 4.0))
        .collect()
}

#[test]
fn built_in_multi_node_systems_load_with_their_nodes() {
    for (name, gpus, per_node) in [
        ("2x8-h100-ib", 16, 8),
        ("2x8-h200-ib", 16, 8),
        ("4x8-b200-ib", 32, 8),
        ("8x8-b200-ib", 64, 8),
        ("gb200-nvl72", 72, 72),
        ("gb300-nvl72", 72, 72),
    ] {
        assert!(
            builtin_names(Kind::System).contains(&name),
            "{name} not built in"
        );
        let s = load(name, &[]);
        assert_eq!(s.spec.gpu_count, gpus, "{name}");
        assert_eq!(s.spec.gpus_per_node(), per_node, "{name}");
        assert_eq!(s.spec.nodes_spanned(per_node), 1, "{name}");
        if per_node < gpus {
            assert_eq!(s.spec.nodes_spanned(per_node + 1), 2, "{name}");
            let net = s.spec.nodes.expect("a multi-node system states its NICs");
            assert_eq!(net.nics_per_node, 8, "{name}: one NIC per GPU");
            assert!((net.nic_rate.0 - 50e9).abs() < 1.0, "{name}: 400 Gb/s");
        } else {
            assert!(s.spec.nodes.is_none(), "{name}: one NVLink domain");
        }
    }
}

/// NCCL's all-reduce across 2 nodes is never faster than the intra-node one on the same
/// bytes (nor any other collective), and more nodes never help.
#[test]
fn across_nodes_is_never_faster_than_within_one() {
    for name in MULTI_NODE {
        let sys = load(name, &[]);
        let g = sys.spec.gpus_per_node();
        // As priced, every collective; at the speed of light the all-reduce (a GPU's NIC
        // share adds to what its link can move, so a bound on the bytes alone may fall).
        let sol = CostParams::speed_of_light();
        let cases = FAMILIES
            .iter()
            .map(|&(family, f)| (family, f, CostParams::default_for(&sys)))
            .chain(std::iter::once((
                "all-reduce at the speed of light",
                FAMILIES[0].1,
                sol,
            )));
        for (family, f, p) in cases {
            {
                for b in sizes() {
                    let mut last = f(&sys, b, g, &p);
                    // An all-to-all of the same bytes per rank over more nodes sends less to
                    // each peer and may drop under NCCL's per-peer LL threshold: it is held
                    // against one node only.
                    let widest = if family == "all-to-all" {
                        2 * g
                    } else {
                        sys.spec.gpu_count
                    };
                    for n in (2 * g..=widest).step_by(g as usize) {
                        let c = f(&sys, b, n, &p);
                        assert!(
                            c.time() >= last.time() * (1.0 - 1e-12),
                            "{name}: {family} of {b} B over {n} GPUs ({}) in {:.3} us, under \
                             {:.3} us over fewer ({})",
                            c.algo.name(),
                            c.time() * 1e6,
                            last.time() * 1e6,
                            last.algo.name()
                        );
                        last = c;
                    }
                }
            }
        }
    }
}

/// A group that fills one node and part of the next (12 GPUs on nodes of 8) is never faster
/// than the full node, and the fewer NICs of its partial node bind its network part: never
/// faster than a group that fills both nodes.
#[test]
fn a_partly_filled_node_binds_with_its_fewer_nics() {
    for name in MULTI_NODE {
        let sys = load(name, &[]);
        let p = CostParams::default_for(&sys);
        let g = sys.spec.gpus_per_node();
        let big = 1024f64.powi(3);
        let full = collective::allreduce(&sys, big, 2 * g, &p).time();
        for n in g + 1..2 * g {
            for b in sizes() {
                let part = collective::allreduce(&sys, b, n, &p).time();
                let one = collective::allreduce(&sys, b, g, &p).time();
                assert!(part >= one * (1.0 - 1e-12), "{name}: {n} GPUs, {b} B");
            }
            let part = collective::allreduce(&sys, big, n, &p).time();
            assert!(part >= full * (1.0 - 1e-12), "{name}: {n} GPUs at 1 GiB");
        }
    }
}

/// Where the NICs bind (B200's NVLink5 is faster than 8 x 400 Gb/s), a 4 GiB all-reduce over
/// two nodes moves the inter-node half of it, 2(N − 1)/N of the message per node, at just
/// under the NICs' line rate: never above it, and within the NICs' efficiency and 10 %.
#[test]
fn a_large_all_reduce_across_nodes_approaches_the_nic_bound() {
    let sys = load("4x8-b200-ib", &[]);
    let net = sys.spec.nodes.unwrap();
    let p = CostParams::default_for(&sys);
    let bytes = 4.0 * 1024f64.powi(3);
    for nodes in [2u32, 4] {
        let n = nodes * 8;
        let nf = nodes as f64;
        let bound = 2.0 * (nf - 1.0) / nf * bytes / (8.0 * net.nic_rate.0);
        let t = collective::allreduce(&sys, bytes, n, &p).time();
        assert!(t >= bound, "{n} GPUs: {t} s under the NIC bound {bound} s");
        assert!(
            t <= bound / net.nic_efficiency.0 * 1.1,
            "{n} GPUs: {t} s, far from the NIC bound {bound} s"
        );
        let sol = collective::allreduce(&sys, bytes, n, &CostParams::speed_of_light()).time();
        assert!(
            sol >= bound * (1.0 - 1e-12) && sol <= t,
            "{n}: bound {sol} s"
        );
    }
}

#[test]
fn a_faster_nic_never_slows_a_collective_and_custom_kernels_stay_in_a_node() {
    for name in MULTI_NODE {
        let base = load(name, &[]);
        let fast = load(name, &["system.nodes.nic_rate=800 Gb/s"]);
        let (pb, pf) = (
            CostParams::default_for(&base),
            CostParams::default_for(&fast),
        );
        for n in [16, base.spec.gpu_count] {
            for (family, f) in FAMILIES {
                for b in sizes().into_iter().step_by(4) {
                    let (slow, quick) = (f(&base, b, n, &pb), f(&fast, b, n, &pf));
                    assert!(
                        quick.time() <= slow.time() * (1.0 + 1e-12),
                        "{name}: {family} of {b} B over {n} GPUs slower on the faster NIC"
                    );
                    if family == "all-reduce" {
                        assert!(
                            matches!(
                                slow.algo,
                                AllReduceAlgo::NcclRing(_)
                                    | AllReduceAlgo::NcclTree(_)
                                    | AllReduceAlgo::NcclNvlsTree
                            ),
                            "{name}: {b} B over {n} GPUs ran {}: only NCCL crosses nodes",
                            slow.algo.name()
                        );
                    }
                }
            }
        }
    }
}

/// With SHARP switches (NCCL's CollNet) a large all-reduce over 4 nodes sends the message
/// once per node instead of 2(N − 1)/N of it: faster than without, never below the NICs'
/// line rate for that, and no faster at all over 2 nodes, where both send it once.
#[test]
fn sharp_reduces_in_the_network() {
    let plain = load("4x8-b200-ib", &[]);
    let sharp = load("4x8-b200-ib", &["system.nodes.sharp=true"]);
    let net = sharp.spec.nodes.unwrap();
    let (pp, ps) = (
        CostParams::default_for(&plain),
        CostParams::default_for(&sharp),
    );
    let bytes = 4.0 * 1024f64.powi(3);
    let (t_plain, t_sharp) = (
        collective::allreduce(&plain, bytes, 32, &pp),
        collective::allreduce(&sharp, bytes, 32, &ps),
    );
    assert_eq!(t_sharp.algo, AllReduceAlgo::NcclCollnet);
    assert!(
        t_sharp.time() < 0.7 * t_plain.time(),
        "{t_sharp:?} vs {t_plain:?}"
    );
    assert!(t_sharp.time() >= bytes / (8.0 * net.nic_rate.0));
    for b in sizes() {
        for n in [16, 24, 32] {
            let (a, s) = (
                collective::allreduce(&plain, b, n, &pp).time(),
                collective::allreduce(&sharp, b, n, &ps).time(),
            );
            assert!(s <= a * (1.0 + 1e-12), "{n} GPUs, {b} B: SHARP slower");
        }
    }
    let two = |sys: &System, p: &CostParams| collective::allreduce(sys, bytes, 16, p).transfer;
    assert!((two(&sharp, &ps) / two(&plain, &pp) - 1.0).abs() < 0.05);
}

/// vLLM's custom all-reduce runs on at most 8 GPUs: a 16-GPU group of an NVL72 rack, one
/// NVLink domain, all-reduces through NCCL, never below the 8-GPU custom kernel's time.
#[test]
fn an_nvl72_group_beyond_eight_gpus_runs_nccl() {
    let sys = load("gb200-nvl72", &[]);
    let p = CostParams::default_for(&sys);
    let small = 64.0 * 1024.0;
    let eight = collective::allreduce(&sys, small, 8, &p);
    let sixteen = collective::allreduce(&sys, small, 16, &p);
    assert_eq!(eight.algo, AllReduceAlgo::OneShot);
    assert!(matches!(
        sixteen.algo,
        AllReduceAlgo::NcclRing(_) | AllReduceAlgo::NcclNvls | AllReduceAlgo::NcclTree(_)
    ));
    assert!(sixteen.time() > eight.time());
}

#[test]
fn bad_node_tables_are_refused_by_field() {
    for (set, field) in [
        ("system.nodes.count=3", "nodes.count"),
        ("system.nodes.count=1", "nodes.count"),
        ("system.nodes.nics_per_node=0", "nodes.nics_per_node"),
        ("system.nodes.nic_efficiency=1.5", "nodes.nic_efficiency"),
    ] {
        let sets = parse_all(&[set.to_string()]).unwrap();
        let e = System::load_with("2x8-h100-ib", &sets)
            .unwrap_err()
            .to_string();
        assert!(e.contains(field), "{set}: {e}");
    }
    let e = common::failure_of(&[
        "op",
        "allreduce",
        "--system",
        "2x8-h100-ib",
        "--bytes",
        "1MiB",
        "--gpus",
        "32",
    ]);
    assert!(e.contains("16"), "{e}");
}

/// Layouts of two nodes run end to end: TP across the nodes pays the network in its
/// all-reduces (slower than within one node, where the same model fits), and pipeline stages
/// split over the nodes pay it in their hops.
#[test]
fn layouts_across_nodes_run_end_to_end() {
    let model = load_model("deepseek-v3-fp8").unwrap();
    let two = load("2x8-h200-ib", &[]);
    let one = load("8x-h200-nvlink", &[]);
    let tpot = |sys: &System, par: Parallel, batch: f64| {
        let s = Scenario::new(&model, sys, par).unwrap();
        let ev = s.evaluator().unwrap();
        let r = ev.evaluate(&rooftop::ops::scenario::Pass::decode(batch, 2048.0));
        assert!(r.total.is_finite() && r.total > 0.0);
        let parts: f64 = r.breakdown.0.iter().sum();
        assert!((parts - r.total).abs() <= 1e-12 * r.total);
        r
    };
    let tp8 = tpot(&one, Parallel::tp(8), 64.0);
    let tp16 = tpot(&two, Parallel::tp(16), 64.0);
    let ar = |r: &rooftop::cost::step::StepCost| {
        r.breakdown.get(rooftop::ops::category::Category::Allreduce)
    };
    assert!(ar(&tp16) > ar(&tp8), "TP16's all-reduces cross the network");
    let pp = Parallel {
        tp: 8,
        ep: 1,
        pp: 2,
        dp: 1,
        redundant_experts: 0,
    };
    let split = tpot(&two, pp, 64.0);
    let pipe = |r: &rooftop::cost::step::StepCost| {
        r.breakdown.get(rooftop::ops::category::Category::Pipeline)
    };
    // tp8 x pp2 hands each token's hidden state (BF16) from one node to the other.
    let p = CostParams::default_for(&two);
    let hop = 64.0 * model.config.hidden_size as f64 * 2.0;
    let across = collective::send_recv_over(&two, hop, &p, true).time();
    let within = collective::send_recv(&two, hop, &p).time();
    assert!(across > within, "the NIC hop is slower than NVLink's");
    assert!(
        pipe(&split) >= across * (1.0 - 1e-12),
        "tp8 x pp2: {} s of pipeline under its {} s hop across nodes",
        pipe(&split),
        across
    );
    let json = common::json_of(&[
        "op",
        "allreduce",
        "--system",
        "2x8-h100-ib",
        "--bytes",
        "1GiB",
        "--gpus",
        "16",
        "--format",
        "json",
    ]);
    let text = json.to_string();
    assert!(text.contains("nccl"), "{text}");
}
