//! Collective physics on every built-in system: time never falls as a message grows, across
//! every switch point the engine has (one-shot → two-shot → symmetric memory → NCCL, LL →
//! Simple, ring → NVLS, point-to-point LL → Simple); a faster link or path never slows a
//! collective; NCCL never runs LL128 over PCIe unless told to; no collective beats the bytes
//! it must move at the raw link rate.

mod common;

use rooftop::cost::collective::{self, AllReduceAlgo, CollectiveCost};
use rooftop::cost::CostParams;
use rooftop::spec::registry::{builtin_names, Kind};
use rooftop::spec::{LinkKind, NcclProtocol, System};

use common::COLLECTIVES as FAMILIES;

use common::load_system as load;

/// Every built-in system, also without CUDA graphs, and the PCIe ones also with a custom
/// all-reduce (a community PCIe kernel) and with P2P off, so every implementation and switch
/// point is exercised.
fn systems() -> Vec<(String, System)> {
    let mut out = Vec::new();
    for name in builtin_names(Kind::System) {
        out.push((name.to_string(), load(name, &[])));
        // eager: the custom all-reduce pays its host-side call and an input copy
        let eager = "system.cuda_graphs=false";
        out.push((format!("{name} [{eager}]"), load(name, &[eager])));
        if load(name, &[]).link.kind == LinkKind::Pcie {
            for set in ["engine.allreduce=custom", "system.p2p=false"] {
                out.push((format!("{name} [{set}]"), load(name, &[set])));
            }
        }
    }
    out
}

/// 1 KiB to 1 GiB in steps of 2^(1/8), plus both sides of every size at which an engine or
/// NCCL switches implementation or protocol.
fn sizes(n: u32) -> Vec<f64> {
    let mut s: Vec<f64> = (0..=160)
        .map(|i| 1024.0 * 2f64.powf(i as f64 / 8.0))
        .collect();
    let kib = 1024.0;
    for limit in [
        256.0 * kib,
        512.0 * kib,
        8.0 * kib * kib,
        64.0 * kib * kib,
        16.0 * kib * n as f64, // all-to-all: 16 KiB per peer
    ] {
        s.extend([limit * (1.0 - 1e-6), limit, limit * (1.0 + 1e-6)]);
    }
    s.sort_by(f64::total_cmp);
    s
}

fn rank_counts(sys: &System) -> Vec<u32> {
    (2..=sys.spec.gpu_count).collect()
}

#[test]
fn time_never_falls_as_a_message_grows() {
    let params = |sys: &System| {
        let d = CostParams::default_for(sys);
        let mut fast = d;
        fast.collective_latency_scale = 0.3;
        let mut slow = d;
        slow.link_efficiency = 0.4;
        [d, fast, slow]
    };
    for (name, sys) in systems() {
        for p in params(&sys) {
            for n in rank_counts(&sys) {
                for (family, f) in FAMILIES {
                    let mut last: Option<(f64, CollectiveCost)> = None;
                    for b in sizes(n) {
                        let c = f(&sys, b, n, &p);
                        assert!(c.time().is_finite() && c.time() > 0.0, "{name} {family}");
                        if let Some((lb, lc)) = last {
                            assert!(
                                c.time() >= lc.time() * (1.0 - 1e-12),
                                "{name}: {family} over {n} GPUs: {b} B takes {:.3} us ({}), \
                                 {lb} B takes {:.3} us ({})",
                                c.time() * 1e6,
                                c.algo.name(),
                                lc.time() * 1e6,
                                lc.algo.name()
                            );
                        }
                        last = Some((b, c));
                    }
                }
            }
        }
    }
}

#[test]
fn more_link_bandwidth_never_slows_a_collective() {
    for name in builtin_names(Kind::System) {
        let base = load(name, &[]);
        let raw = base.link.bandwidth_per_direction.0;
        let faster_link = format!("interconnect.bandwidth={} GB/s", raw * 2.0 / 1e9);
        let mut variants = vec![
            load(name, &[&faster_link]),
            load(name, &["efficiency.link=1.0"]),
        ];
        if let Some(paths) = base.spec.paths {
            // a faster socket link or root complex, within the raw link rate
            let cs = format!("system.paths.cross_socket={} GB/s", raw * 0.99 / 1e9);
            let rc = format!("system.paths.root_complex={} GB/s", raw * 0.99 / 1e9);
            variants.push(load(name, &[&cs]));
            variants.push(load(name, &[&rc, &cs]));
            assert!(
                paths.root_complex.0 <= raw * 0.99,
                "{name}: paths above the link"
            );
        }
        for faster in variants {
            let (pb, pf) = (
                CostParams::default_for(&base),
                CostParams::default_for(&faster),
            );
            assert!(pf.link_efficiency >= pb.link_efficiency);
            for n in rank_counts(&base) {
                for (family, f) in FAMILIES {
                    for b in sizes(n).into_iter().step_by(3) {
                        let (slow, fast) = (f(&base, b, n, &pb), f(&faster, b, n, &pf));
                        assert!(
                            fast.time() <= slow.time() * (1.0 + 1e-12),
                            "{name}: {family} over {n} GPUs of {b} B: {:.3} us on the faster \
                             link ({}) vs {:.3} us ({})",
                            fast.time() * 1e6,
                            fast.algo.name(),
                            slow.time() * 1e6,
                            slow.algo.name()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn nccl_never_picks_ll128_over_pcie_by_default() {
    let mut checked = 0;
    for (name, sys) in systems() {
        if sys.link.kind != LinkKind::Pcie || sys.engine.nccl_protocol != NcclProtocol::Auto {
            continue;
        }
        let p = CostParams::default_for(&sys);
        for n in rank_counts(&sys) {
            for b in sizes(n) {
                for c in [
                    collective::nccl_allreduce(&sys, b, n, &p),
                    collective::allreduce(&sys, b, n, &p),
                    collective::all_gather(&sys, b, n, &p),
                    collective::reduce_scatter(&sys, b, n, &p),
                ] {
                    checked += 1;
                    assert!(
                        !matches!(
                            c.algo,
                            AllReduceAlgo::NcclRing(NcclProtocol::Ll128)
                                | AllReduceAlgo::NcclTree(NcclProtocol::Ll128)
                        ),
                        "{name}: LL128 chosen over PCIe for {b} B on {n} GPUs"
                    );
                }
            }
        }
    }
    assert!(checked > 1000, "no PCIe system was checked");
}

#[test]
fn no_collective_beats_its_bytes_at_the_raw_link_rate() {
    for (name, sys) in systems() {
        for p in [CostParams::default_for(&sys), CostParams::speed_of_light()] {
            for n in rank_counts(&sys) {
                let nf = n as f64;
                // a GPU's own links to the group: one, or on a full mesh one per peer; and
                // across nodes its share of the node's NICs besides
                let nic = match sys.spec.nodes {
                    Some(net) if sys.spec.nodes_spanned(n) > 1 => {
                        net.nics_per_node as f64 / sys.spec.gpus_per_node() as f64 * net.nic_rate.0
                    }
                    _ => 0.0,
                };
                let raw =
                    sys.link.bandwidth_per_direction.0 * collective::mesh_links(&sys, n) + nic;
                for b in sizes(n) {
                    // bytes each rank must send or receive over its own link at the least
                    let floors = [
                        (
                            "all-reduce",
                            collective::allreduce(&sys, b, n, &p),
                            (nf - 1.0) / nf * b,
                        ),
                        (
                            "all-gather",
                            collective::all_gather(&sys, b, n, &p),
                            (nf - 1.0) * b,
                        ),
                        (
                            "reduce-scatter",
                            collective::reduce_scatter(&sys, b, n, &p),
                            (nf - 1.0) / nf * b,
                        ),
                        (
                            "all-to-all",
                            collective::all_to_all(&sys, b, n, &p),
                            (nf - 1.0) / nf * b,
                        ),
                    ];
                    for (family, c, bytes) in floors {
                        let ideal = bytes / raw;
                        assert!(
                            c.time() >= ideal * (1.0 - 1e-12),
                            "{name}: {family} of {b} B over {n} GPUs in {:.3} us, under the \
                             {:.3} us its bytes take at the raw link rate",
                            c.time() * 1e6,
                            ideal * 1e6
                        );
                        assert!(
                            c.time() >= sys.link.p2p_latency.0 * (1.0 - 1e-12),
                            "{name}: {family} faster than one hop"
                        );
                    }
                }
            }
        }
    }
}

/// The team's box puts every GPU on a CPU root port: no pair is within NCCL's default P2P
/// level (PXB), so its rings are staged through host memory (NCCL's SHM transport) and run at
/// the box's staged rates, within a socket up to 4 GPUs and across sockets above; the same
/// box with `NCCL_P2P_LEVEL=SYS` runs peer to peer at NCCL's ring efficiency of the paths'
/// copy rates instead. A cross-socket ring is never faster than a single-socket one.
#[test]
fn pcie_rings_take_the_transport_ncclp2p_level_allows() {
    let big = 512.0 * 1024.0 * 1024.0;
    let busbw = |sys: &rooftop::spec::System, n: u32| {
        let p = CostParams::default_for(sys);
        let nf = n as f64;
        2.0 * (nf - 1.0) / nf * big / collective::nccl_allreduce(sys, big, n, &p).time()
    };
    let sys = load("8x-rtx-pro-6000-pcie", &[]);
    let paths = sys.spec.paths.expect("the team's box states its paths");
    let rings = paths.nccl.expect("and its NCCL rings");
    let (socket, cross) = (
        rings.staged_socket.unwrap().simple.0,
        rings.staged_cross_socket.unwrap().simple.0,
    );
    for (n, rate) in [(4, socket), (8, cross)] {
        assert!(
            (busbw(&sys, n) / rate - 1.0).abs() < 0.02,
            "{n} GPUs staged: {} vs {rate}",
            busbw(&sys, n)
        );
    }
    assert!(busbw(&sys, 8) <= busbw(&sys, 4));
    // Peer to peer everywhere: the paths' copy rates times NCCL's ring efficiency.
    let p2p = load("8x-rtx-pro-6000-pcie", &["engine.nccl_p2p_level=sys"]);
    let eff = collective::model(&p2p.link)
        .ring_efficiency
        .expect("PCIe links state NCCL's ring efficiency")
        .0;
    let (rc, cs) = (
        paths.root_complex.0 * eff,
        paths.cross_socket.unwrap().0 * eff,
    );
    assert!((busbw(&p2p, 4) / rc - 1.0).abs() < 0.02, "4 GPUs P2P");
    assert!((busbw(&p2p, 8) / cs - 1.0).abs() < 0.02, "8 GPUs P2P");
    // A 2-GPU communicator on an AMD host runs peer to peer at NCCL's default level; on
    // another host (or one not stated) its root-complex hop is staged.
    let amd = load("8x-rtx-pro-6000-pcie", &["system.cpu_vendor=amd"]);
    let rc_time = |s: &rooftop::spec::System| {
        let p = CostParams::default_for(s);
        collective::nccl_allreduce(s, big, 2, &p).time()
    };
    assert!(
        rc_time(&amd) < rc_time(&sys),
        "AMD 2-GPU P2P not faster than staged"
    );
    assert_eq!(
        collective::transport(&amd, collective::Path::RootComplex, 2),
        collective::Transport::P2p
    );
    assert_eq!(
        collective::transport(&amd, collective::Path::RootComplex, 4),
        collective::Transport::Staged
    );
    assert_eq!(
        collective::transport(&sys, collective::Path::Switch, 8),
        collective::Transport::P2p,
        "a pair under one switch is within PXB"
    );
}

/// The Server box's NCCL table: a 2-GPU ring (a pair under one switch, peer to peer) is
/// faster per bus byte than the 4- and 8-GPU rings that cross NCCL's P2P level and are staged
/// through host memory; LL across the socket link runs at a quarter of Simple's rate there.
#[test]
fn the_server_box_rings_follow_its_measured_transports() {
    let sys = load("8x-rtx-pro-6000-server-pcie", &[]);
    let p = CostParams::default_for(&sys);
    let big = 256.0 * 1024.0 * 1024.0;
    let ag = |n: u32, bytes: f64| {
        let c = collective::all_gather(&sys, bytes / n as f64, n, &p);
        (n as f64 - 1.0) / n as f64 * bytes / c.transfer
    };
    let (two, four, eight) = (ag(2, big), ag(4, big), ag(8, big));
    assert!(
        two > 1.3 * four && (four / eight - 1.0).abs() < 0.05,
        "{two} {four} {eight}"
    );
    // 256 KiB all-gather over 8 GPUs: NCCL's tuner keeps LL, which runs at the box's
    // measured cross-socket staged LL rate.
    let c = collective::all_gather(&sys, 256.0 * 1024.0 / 8.0, 8, &p);
    assert_eq!(c.algo, AllReduceAlgo::NcclRing(NcclProtocol::Ll));
    let rings = sys.spec.paths.unwrap().nccl.unwrap();
    let ll = rings.staged_cross_socket.unwrap().ll.unwrap().0;
    let rate = 7.0 / 8.0 * 256.0 * 1024.0 / c.transfer;
    assert!((rate / ll - 1.0).abs() < 1e-9, "{rate} vs {ll}");
}

/// NCCL's tuner picks the protocol from its own per-hop estimate (LL at a third of a hop for
/// all-gather), but LL then runs at half the path's P2P rate (4 data bytes per 8-byte line).
/// Across the L40S box's slow socket link the tuner keeps LL where Simple would run faster
/// (the dev table's 8-GPU all-gathers of 64-512 KiB hold ~0.7 GB/s bus bandwidth, LL's rate,
/// and jump to Simple's above); on one switch LL outruns the tuner's third.
#[test]
fn ll_is_chosen_by_the_tuner_estimate_and_runs_at_half_the_path() {
    let sys = load("8x-l40s-pcie", &[]);
    let paths = sys.spec.paths.expect("the L40S box states its paths");
    let p = CostParams::default_for(&sys);
    let kib = 1024.0;
    let bus = |n: u32, bytes: f64| (n as f64 - 1.0) * bytes;
    // 8 GPUs, 256 KiB: LL, at half the cross-socket copy rate, slower than Simple would be.
    let c = collective::all_gather(&sys, 256.0 * kib / 8.0, 8, &p);
    assert_eq!(c.algo, AllReduceAlgo::NcclRing(NcclProtocol::Ll));
    let rate = bus(8, 32.0 * kib) / c.transfer;
    let half = 0.5 * paths.cross_socket.unwrap().0;
    assert!((rate / half - 1.0).abs() < 1e-9, "{rate} vs {half}");
    let simple = load("8x-l40s-pcie", &["engine.nccl_protocol=simple"]);
    let s = collective::all_gather(&simple, 256.0 * kib / 8.0, 8, &p);
    assert!(
        s.time() < c.time(),
        "Simple {} vs LL {}",
        s.time(),
        c.time()
    );
    // 2 GPUs under one switch: LL runs faster than the tuner's third of the ring.
    let c2 = collective::all_gather(&sys, 64.0 * kib / 2.0, 2, &p);
    assert_eq!(c2.algo, AllReduceAlgo::NcclRing(NcclProtocol::Ll));
    let eff = collective::model(&sys.link).ring_efficiency.unwrap().0;
    let tuner_ll = paths.switch.unwrap().0 * eff / 3.0;
    assert!(bus(2, 32.0 * kib) / c2.transfer > 1.5 * tuner_ll);
}

/// vLLM's custom all-reduce runs a fixed grid (36 CTAs x 512 threads, one 16-byte load per
/// peer in flight per thread): over a remote load latency that caps its rate by Little's
/// law. On B200's NVLink the cap binds with one peer (2 GPUs: the kernel pulls a quarter of
/// the link) and not with seven (8 GPUs: the link binds first); a shorter load latency never
/// slows a call; a longer one slows the 2-GPU call in proportion.
#[test]
fn the_custom_allreduce_grid_caps_its_rate_by_its_loads_in_flight() {
    let p = |s: &System| CostParams::default_for(s);
    let bytes = 8.0 * 1024.0 * 1024.0 * 0.99;
    let time = |sets: &[&str], n: u32| {
        let s = load("8x-b200-nvlink", sets);
        collective::allreduce(&s, bytes, n, &p(&s))
    };
    let base2 = time(&[], 2);
    let in_flight = 36.0 * 512.0 * 16.0;
    let latency = 1.7e-6;
    assert!(
        (base2.transfer - bytes * latency / in_flight).abs() < 1e-3 * base2.transfer,
        "{base2:?}"
    );
    let uncapped = |n| {
        time(
            &["link.collective.custom_allreduce_remote_load_latency=1ns"],
            n,
        )
    };
    assert!(uncapped(2).time() < 0.5 * base2.time());
    // Eight GPUs: seven peers' loads in flight, the link binds.
    assert!((uncapped(8).time() - time(&[], 8).time()).abs() < 1e-12);
    // Twice the latency: the 2-GPU transfer doubles.
    let slow = time(
        &["link.collective.custom_allreduce_remote_load_latency=3.4us"],
        2,
    );
    assert!((slow.transfer / base2.transfer - 2.0).abs() < 1e-9);
}

/// Called eagerly, the custom all-reduce never beats the same call inside a CUDA graph.
#[test]
fn an_eager_custom_allreduce_never_beats_the_graphed_one() {
    for name in builtin_names(Kind::System) {
        let g = load(name, &[]);
        let e = load(name, &["system.cuda_graphs=false"]);
        for n in rank_counts(&g) {
            for b in sizes(n) {
                let (tg, te) = (
                    collective::allreduce(&g, b, n, &CostParams::default_for(&g)).time(),
                    collective::allreduce(&e, b, n, &CostParams::default_for(&e)).time(),
                );
                assert!(te >= tg * (1.0 - 1e-12), "{name} n={n} {b} B: {te} < {tg}");
            }
        }
    }
}
