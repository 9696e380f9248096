//! How fast the analytic model is: full-model evaluations of one design point per second on
//! one core (Kimi-K2.5, 61 layers, MoE + MLA, on the team's box), and the serving sweep.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use rooftop::cost::{CostParams, Evaluator, Parallel, Pass};
use rooftop::explore::{explore, Selection, Stream};
use rooftop::predict::{predict, Scenario};
use rooftop::serve::{sweep, TpotDef, Workload};
use rooftop::spec::registry::load_model;
use rooftop::spec::System;

fn bench(c: &mut Criterion) {
    let m = load_model("kimi-k2.5-int4").unwrap();
    let s = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let ev = Evaluator::new(&m, &s, Parallel::tp(8), CostParams::default_for(&s)).unwrap();
    let mut g = c.benchmark_group("kimi-k2.5-int4 on 8x-rtx-pro-6000-pcie");
    g.throughput(Throughput::Elements(1));
    g.bench_function(
        "evaluate one decode step (full model, with per-op records)",
        |b| {
            let mut batch = 1.0;
            b.iter(|| {
                batch = if batch > 4000.0 { 1.0 } else { batch + 1.0 };
                black_box(ev.evaluate(black_box(&Pass::decode(batch, 4096.0))).total)
            })
        },
    );
    // Unstructured points: every evaluation a fresh (batch, context), the full model priced
    // with nothing shared between points.
    g.bench_function(
        "step time, unstructured points (full model, no sharing)",
        |b| {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            b.iter(|| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let batch = (x % 4096 + 1) as f64;
                let context = ((x >> 20) % 131_072 + 1) as f64;
                black_box(ev.step_time(black_box(&Pass::decode(batch, context))))
            })
        },
    );
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    g.bench_function("predict record (default + SOL + memory + rows)", |b| {
        b.iter(|| black_box(predict(&sc, black_box(64), 4096).unwrap().tpot_ms))
    });
    g.bench_function("serving sweep, 9 concurrencies", |b| {
        let conc = [1, 2, 4, 8, 16, 32, 64, 128, 256];
        b.iter(|| {
            black_box(
                sweep(
                    &sc,
                    &conc,
                    Workload {
                        input_len: 1000,
                        output_len: 1000,
                        tpot_def: TpotDef::Itl,
                        client: Default::default(),
                    },
                )
                .unwrap()
                .plateau_tok_s,
            )
        })
    });
    g.finish();

    // The design-space explorer on all cores: 4 systems x 64 batches x 128 contexts per
    // iteration (the README grid's shape, thinned in batch), Pareto front only.
    let systems: Vec<(String, System)> = [
        "8x-rtx-pro-6000-pcie",
        "8x-h200-nvlink",
        "8x-b200-nvlink",
        "8x-h100-nvlink",
    ]
    .iter()
    .map(|n| (n.to_string(), System::load(n).unwrap()))
    .collect();
    let batches: Vec<u32> = (1..=64).map(|b| b * 64).collect();
    let contexts: Vec<u32> = (1..=128).map(|c| c * 1024).collect();
    let mut g = c.benchmark_group("explore");
    g.throughput(Throughput::Elements(
        (systems.len() * batches.len() * contexts.len()) as u64,
    ));
    g.bench_function(
        "kimi-k2.5-int4, 4 systems x 64 batches x 128 contexts, pareto",
        |b| {
            b.iter(|| {
                let mut sink = std::io::sink();
                black_box(
                    explore(
                        &m,
                        &systems,
                        &[None],
                        &[None],
                        &batches,
                        &contexts,
                        Stream::None,
                        true,
                        &Selection::default(),
                        &mut sink,
                        false,
                    )
                    .unwrap()
                    .1
                    .pareto
                    .len(),
                )
            })
        },
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
