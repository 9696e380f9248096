//! Speculative decoding obeys its arithmetic: no acceptance never speeds anything up, a free
//! draft cannot beat the expected tokens per step, and the gain shrinks as a dense model's
//! verify pass turns compute-bound with concurrency.

use rooftop::cost::Parallel;
use rooftop::predict::Scenario;
use rooftop::spec::registry::load_model;
use rooftop::spec::System;
use rooftop::specdec::{specdec, Acceptance, Draft};

const C: [u32; 6] = [1, 4, 16, 64, 256, 1024];

#[test]
fn zero_acceptance_never_speeds_up() {
    for (m, s, draft) in [
        ("kimi-k2.5-int4", "8x-rtx-pro-6000-pcie", Draft::Eagle),
        ("deepseek-v3-fp8", "8x-h200-nvlink", Draft::Mtp),
        (
            "llama-3.1-70b",
            "8x-h100-nvlink",
            Draft::Ngram { cpu_seconds: 0.0 },
        ),
    ] {
        let model = load_model(m).unwrap();
        let sys = System::load(s).unwrap();
        let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
        let r = specdec(&sc, &draft, &Acceptance(vec![0.0]), &[1, 2, 4, 8], &C, 2048).unwrap();
        for p in &r.points {
            assert!(
                p.speedup <= 1.0 + 1e-12,
                "{m} {:?}: k={} C={} speedup {}",
                draft,
                p.k,
                p.concurrency,
                p.speedup
            );
        }
        assert!(r.best_k.iter().all(|b| b.k == 0));
    }
}

#[test]
fn a_free_draft_at_c1_never_beats_the_expected_tokens() {
    let model = load_model("kimi-k2.5-int4").unwrap();
    let sys = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    for acc in [vec![0.9], vec![0.75, 0.5, 0.3], vec![1.0]] {
        let a = Acceptance(acc);
        let r = specdec(
            &sc,
            &Draft::Ngram { cpu_seconds: 0.0 },
            &a,
            &[1, 2, 3, 5, 8],
            &[1],
            1024,
        )
        .unwrap();
        for p in &r.points {
            assert!(
                p.speedup <= p.expected_tokens_per_step * (1.0 + 1e-12),
                "k={}: {} > {}",
                p.k,
                p.speedup,
                p.expected_tokens_per_step
            );
            assert!(p.speedup > 1.0, "a free draft with acceptance pays at C=1");
        }
    }
}

#[test]
fn gain_falls_as_concurrency_rises_on_a_dense_model() {
    // Llama-3.1-70B on H100: verify is nearly free while decode is memory-bound, and costs
    // (k+1)x once the batch is compute-bound.
    let model = load_model("llama-3.1-70b").unwrap();
    let sys = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    let r = specdec(
        &sc,
        &Draft::Eagle,
        &Acceptance(vec![0.8]),
        &[1, 2, 4],
        &[1, 16, 128, 512, 2048],
        // Short enough that 2,048 sequences fit in the KV cache: every point runs.
        256,
    )
    .unwrap();
    assert!(r.does_not_fit.is_empty(), "{:?}", r.does_not_fit);
    for k in [1, 2, 4] {
        let s: Vec<f64> = r
            .points
            .iter()
            .filter(|p| p.k == k)
            .map(|p| p.speedup)
            .collect();
        for w in s.windows(2) {
            assert!(
                w[1] <= w[0] * (1.0 + 1e-9),
                "k={k}: speedups {s:?} rise with concurrency"
            );
        }
        assert!(
            s[0] > 1.5 && *s.last().unwrap() < s[0] / 1.5,
            "k={k}: {s:?}"
        );
    }
}

#[test]
fn drafts_that_the_model_lacks_are_refused() {
    let model = load_model("kimi-k2.5-int4").unwrap();
    let sys = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    let e = specdec(&sc, &Draft::Mtp, &Acceptance(vec![0.8]), &[1], &[1], 1024)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no MTP layer"), "{e}");
    let q = load_model("qwen3-32b").unwrap();
    let sc = Scenario::new(&q, &sys, Parallel::tp(4)).unwrap();
    let e = specdec(&sc, &Draft::Eagle, &Acceptance(vec![0.8]), &[1], &[1], 1024)
        .unwrap_err()
        .to_string();
    assert!(e.contains("eagle_head"), "{e}");
}

/// C means what it means to `sweep`: beyond what max_num_seqs and the KV cache hold, more
/// requests wait and change nothing about the step.
#[test]
fn concurrency_beyond_the_engines_caps_runs_at_the_cap() {
    let model = load_model("kimi-k2.5-int4").unwrap();
    let sys = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    let acc = Acceptance(vec![0.8, 0.6]);
    let r = specdec(&sc, &Draft::Eagle, &acc, &[1, 2], &[1, 1 << 20], 2048).unwrap();
    assert!(r.does_not_fit.is_empty(), "{:?}", r.does_not_fit);
    let big: Vec<_> = r
        .points
        .iter()
        .filter(|p| p.concurrency == 1 << 20)
        .collect();
    let running = big[0].running;
    assert!(
        running > 1 && running <= sys.engine.max_num_seqs,
        "{running}"
    );
    let capped = specdec(&sc, &Draft::Eagle, &acc, &[1, 2], &[running], 2048).unwrap();
    for (a, b) in big.iter().zip(&capped.points) {
        assert_eq!((a.k, a.running), (b.k, b.running));
        assert!((a.tpot_ms - b.tpot_ms).abs() <= 1e-9 * b.tpot_ms);
        assert!((a.throughput_tok_s - b.throughput_tok_s).abs() <= 1e-9 * b.throughput_tok_s);
    }
    let one = r.points.iter().find(|p| p.concurrency == 1).unwrap();
    assert_eq!(one.running, 1);
}

/// A seeded xorshift generator: the same draws every run.
fn uniform(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 11) as f64 / (1u64 << 53) as f64
}

/// What engines print after `steps` simulated verify steps of `k` drafts under the true
/// conditional rates `truth`: (accepted drafts per step, one count per step).
fn simulate(truth: &Acceptance, k: usize, steps: usize, seed: u64) -> Vec<usize> {
    let mut s = seed;
    (0..steps)
        .map(|_| {
            let mut l = 0;
            while l < k && uniform(&mut s) < truth.at(l) {
                l += 1;
            }
            l
        })
        .collect()
}

/// Each engine's statistic, computed from a Monte-Carlo run of the acceptance process the way
/// the engine computes it, converts back to rates whose expected tokens per step are the
/// simulated ones (and, for per-position statistics, to the true rates).
#[test]
fn acceptance_statistics_convert_as_a_monte_carlo_run_says() {
    use rooftop::specdec::AcceptanceStat as S;
    let n = 400_000;
    for (truth, seed) in [
        (
            Acceptance(vec![0.8, 0.65, 0.5, 0.4]),
            0x2545F4914F6CDD1D_u64,
        ),
        (Acceptance(vec![0.7]), 0x9E3779B97F4A7C15),
    ] {
        for k in [1usize, 3, 4] {
            let l = simulate(&truth, k, n, seed);
            let mean_l = l.iter().sum::<usize>() as f64 / n as f64;
            let tokens = 1.0 + mean_l;
            // per position i = 1..k: the share of steps with at least i accepted
            let uncond: Vec<f64> = (1..=k)
                .map(|i| l.iter().filter(|x| **x >= i).count() as f64 / n as f64)
                .collect();
            let cond: Vec<f64> = (0..k)
                .map(|i| {
                    let before = if i == 0 { 1.0 } else { uncond[i - 1] };
                    uncond[i] / before
                })
                .collect();
            let printed: [(S, Vec<f64>); 6] = [
                (S::Conditional, cond.clone()),
                (S::Unconditional, uncond.clone()),
                (S::VllmMeanLength, vec![tokens]),
                (S::SglangAcceptLength, vec![tokens]),
                (S::MeanAccepted, vec![mean_l]),
                (S::TrtllmAcceptanceRate, vec![mean_l / k as f64]),
            ];
            for (stat, v) in printed {
                let a = Acceptance::from_stat(stat, &v, Some(k as u32)).unwrap();
                let e = a.expected_tokens(k);
                assert!(
                    (e - tokens).abs() < 1e-6 * tokens,
                    "{stat:?} k={k}: {e} tokens/step from {v:?}, Monte Carlo {tokens}"
                );
                // The formula for the true rates agrees with the simulation.
                assert!((truth.expected_tokens(k) - tokens).abs() < 0.01);
                // Per-position statistics recover the true rates; a single figure recovers a
                // constant rate exactly.
                let recovers = !stat.is_scalar() || truth.0.len() == 1;
                if recovers {
                    for i in 0..k {
                        assert!(
                            (a.at(i) - truth.at(i)).abs() < 0.01,
                            "{stat:?} k={k} position {}: {} vs true {}",
                            i + 1,
                            a.at(i),
                            truth.at(i)
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn impossible_acceptance_figures_are_refused() {
    use rooftop::specdec::AcceptanceStat as S;
    for (stat, v, k) in [
        // more tokens per step than the bonus plus k drafts
        (S::SglangAcceptLength, vec![4.5], Some(3)),
        (S::VllmMeanLength, vec![0.5], Some(3)),
        (S::MeanAccepted, vec![3.5], Some(3)),
        (S::TrtllmAcceptanceRate, vec![1.2], Some(3)),
        // a single figure needs its draft length
        (S::SglangAcceptLength, vec![2.0], None),
        // unconditional rates cannot rise
        (S::Unconditional, vec![0.5, 0.6], None),
        (S::Conditional, vec![1.5], None),
    ] {
        assert!(
            Acceptance::from_stat(stat, &v, k).is_err(),
            "{stat:?} {v:?} at {k:?} accepted"
        );
    }
}

mod common;

/// `validate` reads a speculative-decoding runs CSV: rows without an acceptance figure are
/// counted, not evaluated; every evaluated row keeps the speedup below the tokens per step.
#[test]
fn validate_reads_specdec_runs() {
    use rooftop::measured::specdec_csv::{is_specdec_csv, parse_specdec_csv};
    for path in common::data_and_shared("dev/specdec_runs.csv", "measured/dev/specdec_runs.csv") {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(is_specdec_csv(&text));
        let runs = parse_specdec_csv(&text, "specdec_runs.csv").unwrap();
        let v = rooftop::specdec_runs::evaluate(&runs, "specdec_runs.csv").unwrap();
        assert_eq!(v.total_rows, runs.len());
        assert_eq!(v.rows.len() + v.not_evaluated.len(), runs.len());
        assert!(v.without_acceptance > 0 && !v.rows.is_empty());
        for r in &v.rows {
            assert!(
                r.predicted_speedup <= r.expected_tokens_per_step * (1.0 + 1e-9),
                "line {}: {} > {}",
                r.line,
                r.predicted_speedup,
                r.expected_tokens_per_step
            );
        }
    }
}

#[test]
fn malformed_specdec_rows_are_refused_naming_the_row() {
    use rooftop::measured::specdec_csv::parse_specdec_csv;
    let head = "gpu,num_gpus,engine,model_id,precision,tp,method,spec_tokens,input_len,output_len,concurrency_or_batch,metric,baseline_value,spec_value,acceptance_metric,acceptance_value";
    for bad in ["-3", "nan", "fast", "0"] {
        let t = format!(
            "{head}\nH100,1,SGLang,m/x,bf16,1,eagle3,3,1,1,1,tok/s,100,{bad},accept_length,2.0\n"
        );
        let e = parse_specdec_csv(&t, "runs.csv").unwrap_err().to_string();
        assert!(e.contains("runs.csv:2") && e.contains("spec_value"), "{e}");
    }
    let e = parse_specdec_csv("gpu,spec_value\n", "runs.csv")
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing column"), "{e}");
}

#[test]
fn impossible_specdec_rows_are_refused_naming_the_row() {
    use rooftop::measured::specdec_csv::parse_specdec_csv;
    let head = "gpu,num_gpus,engine,model_id,precision,tp,method,spec_tokens,input_len,output_len,concurrency_or_batch,metric,baseline_value,spec_value,acceptance_metric,acceptance_value";
    for row in [
        // an accept length beyond the bonus token plus 3 drafts
        "H100,1,SGLang,meta-llama/Llama-3.1-8B-Instruct,bf16,1,eagle3,3,MT-Bench,MT-Bench,1,throughput (tok/s),100,150,accept_length,4.5",
        // a speedup beyond what 3 drafts can emit
        "H100,1,SGLang,meta-llama/Llama-3.1-8B-Instruct,bf16,1,eagle3,3,MT-Bench,MT-Bench,1,throughput (tok/s),100,900,accept_length,2.5",
    ] {
        let t = format!("{head}\n{row}\n");
        let runs = parse_specdec_csv(&t, "runs.csv").unwrap();
        let e = rooftop::specdec_runs::evaluate(&runs, "runs.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("runs.csv:2"), "{e}");
    }
}

/// The KV cache the engine reserves for the draft lookahead never raises the sequences
/// that fit: more drafts, no more running sequences.
#[test]
fn kv_lookahead_never_raises_the_sequences_that_fit() {
    let model = load_model("llama-3.1-70b").unwrap();
    let sys = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    let mut last = u32::MAX;
    for k in [1, 2, 4, 8, 16, 32, 64] {
        let r = specdec(
            &sc,
            &Draft::Eagle,
            &Acceptance(vec![0.8]),
            &[k],
            &[1 << 20],
            32768,
        )
        .unwrap();
        let running = r.points[0].running;
        assert!(running <= last, "k={k}: {running} running > {last}");
        assert!(r.points[0].speedup <= r.points[0].expected_tokens_per_step * (1.0 + 1e-12));
        last = running;
    }
}

/// Each draft length holds its own lookahead: a k = 1 row is the same whether or not a
/// longer k is asked for beside it, and one that fits is priced where a longer k alone
/// does not fit (before, every row held the longest k's positions).
#[test]
fn each_draft_length_holds_its_own_lookahead() {
    let model = load_model("llama-3.1-70b").unwrap();
    let sys = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    let acc = Acceptance(vec![0.9]);
    let run = |ks: &[u32], c: u32, ctx: u32| specdec(&sc, &Draft::Eagle, &acc, ks, &[c], ctx);
    let alone = run(&[1], 1 << 20, 4096).unwrap();
    let beside = run(&[1, 64], 1 << 20, 4096).unwrap();
    let one = beside.points.iter().find(|p| p.k == 1).unwrap();
    assert_eq!(one.running, alone.points[0].running);
    assert_eq!(one.tpot_ms, alone.points[0].tpot_ms);
    let long = beside.points.iter().find(|p| p.k == 64).unwrap();
    assert!(
        long.running < one.running,
        "{} vs {}",
        long.running,
        one.running
    );
    // At the window's edge, k = 1 fits and k = 64 does not: k = 1 is priced, k = 64 says why.
    let edge = model.config.max_position_embeddings.unwrap() - 32;
    assert!(run(&[64], 1, edge).is_err());
    let r = run(&[1, 64], 1, edge).unwrap();
    assert_eq!(r.points.len(), 1);
    assert_eq!(r.points[0].k, 1);
    assert!(r
        .does_not_fit
        .iter()
        .any(|(_, why)| why.starts_with("k = 64")));
}

/// A separate draft model's weights come out of the same memory as the KV cache: the
/// sequences that speculate fit in what the target's and the draft's weights leave, each
/// with both caches (before, only the draft's cache was counted: 81 sequences, not 55).
#[test]
fn a_draft_models_weights_leave_less_room_for_the_cache() {
    use rooftop::cost::memory::{kv_bytes_per_token_per_gpu, weight_bytes_per_gpu};
    let model = load_model("llama-3.1-70b").unwrap();
    let sys = System::load("8x-h100-nvlink").unwrap();
    let par = Parallel::tp(8);
    let sc = Scenario::new(&model, &sys, par).unwrap();
    let (k, ctx) = (2u32, 8192u32);
    let draft = Draft::Model {
        spec: Box::new(model.clone()),
        tp: 8,
    };
    let r = specdec(&sc, &draft, &Acceptance(vec![0.8]), &[k], &[4096], ctx).unwrap();
    let running = r.points[0].running as f64;
    let budget = sc.memory(1.0, ctx as f64).kv_budget_gb * 1e9;
    let draft_weights = weight_bytes_per_gpu(&model, &par);
    let per_token = 2.0 * kv_bytes_per_token_per_gpu(&model, &par);
    let fit = (budget - draft_weights) / (per_token * (ctx + k + 1) as f64);
    assert!(
        running <= fit.floor() && running >= fit.floor() - 2.0,
        "{running} running, {fit:.1} fit beside the draft's {:.1} GB",
        draft_weights / 1e9
    );
    assert!(r.points[0].plain_running as f64 > 2.0 * fit);
}

/// Llama-3.1-70B on 8 × H100 under SGLang (with `sets` overriding descriptions), EAGLE at a
/// constant acceptance of 0.8, context 2,048: the record and the engine it ran under.
fn sglang_70b_eagle(
    sets: &[&str],
    ks: &[u32],
    cs: &[u32],
) -> (
    rooftop::specdec::SpecDec,
    rooftop::spec::engine::EngineSpec,
    f64,
) {
    use rooftop::spec::overrides::parse_all;
    let model = load_model("llama-3.1-70b").unwrap();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let sys =
        System::load_with_engine("8x-h100-nvlink", Some("sglang"), &parse_all(&sets).unwrap())
            .unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    let r = specdec(&sc, &Draft::Eagle, &Acceptance(vec![0.8]), ks, cs, 2048).unwrap();
    (r, sys.engine.clone(), sc.params.step_overhead)
}

#[test]
fn an_engine_that_turns_overlap_off_to_speculate_pays_its_cpu_in_series() {
    // SGLang turns its overlap scheduler off for EAGLE drafts: the speculative step carries
    // the engine's CPU after the GPU, while the plain step hides it. The same draft with the
    // overlap kept is faster by exactly that CPU work where the GPU step is the longer.
    let run = |sets: &[&str]| {
        let (r, e, o) = sglang_70b_eagle(sets, &[3], &[1, 8]);
        (r, e.cpu, o)
    };
    let (off, cpu, overhead) = run(&[]);
    assert_eq!(cpu.overlap_when_speculating, Some(false));
    let (kept, _, _) = run(&["engine.cpu.overlap_when_speculating=true"]);
    for (a, b) in off.points.iter().zip(&kept.points) {
        let cpu_step = overhead + cpu.per_seq.0 * a.running as f64;
        assert!(
            a.speedup < b.speedup,
            "C={}: {} vs {}",
            a.concurrency,
            a.speedup,
            b.speedup
        );
        assert!(
            ((a.step_ms - b.step_ms) - cpu_step * 1e3).abs() < 1e-9 * a.step_ms,
            "C={}: the steps differ by {} ms, the CPU's work is {} ms",
            a.concurrency,
            a.step_ms - b.step_ms,
            cpu_step * 1e3
        );
    }
}

/// Where the gain is not monotone in C (Kimi-K2.5's MoE verify loses at C = 8, where k + 1
/// tokens a sequence read experts a plain step does not, and pays again at 64), the
/// breakeven says both, and the order C is given in changes nothing.
#[test]
fn a_gain_that_returns_is_reported_whatever_the_order_of_c() {
    let model = load_model("kimi-k2.5-int4").unwrap();
    let sys = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    let acc = Acceptance(vec![0.75, 0.5, 0.3]);
    let at = |c: &[u32]| specdec(&sc, &Draft::Eagle3, &acc, &[3], c, 1024).unwrap();
    let (up, down) = (at(&[1, 8, 64]), at(&[64, 8, 1]));
    assert_eq!(up.breakeven, down.breakeven);
    let b = &up.breakeven[0];
    let speedup = |c: u32| {
        up.points
            .iter()
            .find(|p| p.concurrency == c)
            .unwrap()
            .speedup
    };
    assert!(speedup(1) > 1.0 && speedup(8) < 1.0 && speedup(64) > 1.0);
    assert_eq!((b.stops_at, b.pays_again_at), (Some(8), Some(64)));
    let x = b.crossing_concurrency.unwrap();
    assert!((1.0..=8.0).contains(&x), "crossing {x}");
    let only = at(&[8, 64]).breakeven[0].clone();
    assert_eq!(
        (only.stops_at, only.crossing_concurrency, only.pays_again_at),
        (Some(8), None, Some(64))
    );
}

#[test]
fn specdec_says_where_speculation_stops_paying() {
    // Llama-3.1-70B on H100 with an EAGLE head: a long draft pays at C = 1 and loses once
    // the batch makes the verify pass compute-bound. The crossing lies between the last
    // swept concurrency that pays and the first that does not, and the reason names the
    // step's cost against the tokens it yields.
    let model = load_model("llama-3.1-70b").unwrap();
    let sys = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    let conc = [1, 4, 16, 64, 256, 1024, 2048];
    let r = specdec(
        &sc,
        &Draft::Eagle,
        &Acceptance(vec![0.6]),
        &[2, 6],
        &conc,
        256,
    )
    .unwrap();
    assert_eq!(r.breakeven.len(), 2);
    let mut stopped = 0;
    for b in &r.breakeven {
        let row: Vec<_> = r.points.iter().filter(|p| p.k == b.k).collect();
        match b.stops_at {
            Some(c) => {
                stopped += 1;
                let i = row.iter().position(|p| p.concurrency == c).unwrap();
                assert!(row[i].speedup < 1.0);
                assert!(row[..i].iter().all(|p| p.speedup >= 1.0), "k={}", b.k);
                assert!(b.why.contains(&format!("C = {c}")) && b.why.contains("tokens"));
                if i > 0 {
                    let x = b.crossing_concurrency.unwrap();
                    assert!(
                        x >= row[i - 1].concurrency as f64 && x <= c as f64,
                        "k={}: crossing {x} outside C = {}..{c}",
                        b.k,
                        row[i - 1].concurrency
                    );
                } else {
                    assert!(b.crossing_concurrency.is_none());
                }
            }
            None => assert!(row.iter().all(|p| p.speedup >= 1.0), "k={}", b.k),
        }
    }
    assert!(
        stopped > 0,
        "no draft length stopped paying by C = 2048: {:?}",
        r.breakeven
    );
}

#[test]
fn an_engines_host_work_around_the_passes_costs_what_its_counts_say() {
    // SGLang's [speculation] table counts the eager launches, host syncs and forward-batch
    // builds around its EAGLE passes. Dropping them leaves a step shorter by exactly their
    // cost, never longer, and the speedup never higher with them.
    let run = |sets: &[&str]| {
        let (r, e, _) = sglang_70b_eagle(sets, &[1, 3, 6], &[1, 8, 64]);
        (r, e)
    };
    let (with, engine) = run(&[]);
    let h = engine.speculation;
    assert!(h.eager_launches > 0 && h.host_syncs > 0);
    let (without, _) = run(&[
        "engine.speculation.eager_launches=0",
        "engine.speculation.eager_launches_per_draft_pass=0",
        "engine.speculation.host_syncs=0",
        "engine.speculation.extra_forward_batches=0",
    ]);
    for (a, b) in with.points.iter().zip(&without.points) {
        // A chain (topk 1): launches, syncs and forward batches only.
        let cost = (h.eager_launches + h.eager_launches_per_draft_pass * (a.k - 1)) as f64
            * engine.kernel_launch.0
            + h.host_syncs as f64 * h.host_sync.0
            + h.extra_forward_batches as f64 * h.forward_batch.0;
        assert!(a.speedup <= b.speedup, "k={} C={}", a.k, a.concurrency);
        assert!(
            ((a.step_ms - b.step_ms) - cost * 1e3).abs() < 1e-9 * a.step_ms,
            "k={} C={}: the steps differ by {} ms, the counted host work is {} ms",
            a.k,
            a.concurrency,
            a.step_ms - b.step_ms,
            cost * 1e3
        );
    }
}

/// SGLang lowers its cap on running requests to 48 while it drafts with a model (its
/// server_args, unless the launch sets one): at C = 64 the speculating side runs 48, the
/// plain side 64, and the speedup is the throughput ratio over all 64 requests. An n-gram
/// draft keeps the plain cap; a lower `max_num_seqs` binds both.
#[test]
fn an_engines_cap_while_speculating_binds_only_the_speculating_side() {
    let (r, eng, _) = sglang_70b_eagle(&[], &[3], &[32, 64]);
    assert_eq!(eng.max_num_seqs_when_speculating, Some(48));
    let at = |c: u32| r.points.iter().find(|p| p.concurrency == c).unwrap();
    let base = |c: u32| {
        r.baseline_tpot_ms
            .iter()
            .find(|(at, _)| *at == c)
            .unwrap()
            .1
    };
    let p32 = at(32);
    assert_eq!((p32.running, p32.plain_running), (32, 32));
    assert!((p32.speedup - base(32) / p32.tpot_ms).abs() <= 1e-9 * p32.speedup);
    let p64 = at(64);
    assert_eq!((p64.running, p64.plain_running), (48, 64));
    let throughput_ratio = (48.0 / p64.tpot_ms) / (64.0 / base(64));
    assert!((p64.speedup - throughput_ratio).abs() <= 1e-9 * throughput_ratio);
    // Running fewer sequences never makes the step longer, so the TPOT ratio overstates
    // what the 64 requests see.
    assert!(p64.speedup < base(64) / p64.tpot_ms);

    let model = load_model("llama-3.1-70b").unwrap();
    let sys = System::load_with_engine("8x-h100-nvlink", Some("sglang"), &[]).unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    let ngram = Draft::Ngram { cpu_seconds: 50e-6 };
    let n = specdec(&sc, &ngram, &Acceptance(vec![0.5]), &[3], &[64], 2048).unwrap();
    assert_eq!((n.points[0].running, n.points[0].plain_running), (64, 64));

    let (r8, _, _) = sglang_70b_eagle(&["engine.max_num_seqs=8"], &[3], &[64]);
    assert_eq!((r8.points[0].running, r8.points[0].plain_running), (8, 8));
    let (lifted, _, _) =
        sglang_70b_eagle(&["engine.max_num_seqs_when_speculating=64"], &[3], &[64]);
    assert_eq!(lifted.points[0].running, 64);
}

#[test]
fn a_cap_of_no_sequences_while_speculating_is_refused() {
    use rooftop::spec::overrides::parse_all;
    let sets = parse_all(&["engine.max_num_seqs_when_speculating=0".to_string()]).unwrap();
    let e = System::load_with_engine("8x-h100-nvlink", Some("sglang"), &sets)
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_num_seqs_when_speculating"), "{e}");
}

const SPEC_HEAD: &str = "source_url,gpu,num_gpus,engine,model_id,precision,tp,method,spec_tokens,input_len,output_len,concurrency_or_batch,metric,baseline_value,spec_value,acceptance_metric,acceptance_value";

/// The tokens per step a row without acceptance implies is the acceptance that makes the
/// predicted speedup the measured one: a row whose "measured" speedup is rooftop's own
/// prediction at accept length 2.4 implies 2.4, at every batch (a flat sweep, spread 1).
#[test]
fn implied_tokens_per_step_round_trip_rooftops_own_prediction() {
    use rooftop::measured::specdec_csv::parse_specdec_csv;
    let row = |c: u32, spec: f64, acc: &str| {
        format!("https://example.org/run,H100,1,SGLang,meta-llama/Llama-3.1-8B-Instruct,bf16,1,eagle3,3,512,256,{c},throughput (tok/s),100,{spec},accept_length,{acc}")
    };
    let cs = [1u32, 8, 32];
    let with: Vec<String> = cs.iter().map(|&c| row(c, 150.0, "2.4")).collect();
    let runs = parse_specdec_csv(&format!("{SPEC_HEAD}\n{}\n", with.join("\n")), "a.csv").unwrap();
    let v = rooftop::specdec_runs::evaluate(&runs, "a.csv").unwrap();
    assert_eq!(v.rows.len(), 3);
    let without: Vec<String> = v
        .rows
        .iter()
        .map(|r| row(r.concurrency, 100.0 * r.predicted_speedup, ""))
        .collect();
    let runs =
        parse_specdec_csv(&format!("{SPEC_HEAD}\n{}\n", without.join("\n")), "b.csv").unwrap();
    let v = rooftop::specdec_runs::evaluate(&runs, "b.csv").unwrap();
    assert_eq!(v.without_acceptance, 3);
    assert_eq!(v.implied.len(), 3);
    for i in &v.implied {
        assert!(i.within_reach);
        assert!(
            (i.implied_tokens_per_step - 2.4).abs() < 1e-4,
            "C = {}: {}",
            i.concurrency,
            i.implied_tokens_per_step
        );
    }
    assert_eq!(v.implied_series.len(), 1);
    assert!((v.implied_series[0].spread - 1.0).abs() < 1e-4);
}

/// A source that prints no acceptance gets the figure `configs/specdec/runs.toml` supplies
/// for it (EAGLE-3's SGLang table), and its rows are reported apart from rows with their own.
#[test]
fn a_supplied_acceptance_is_used_and_reported_apart() {
    use rooftop::measured::specdec_csv::parse_specdec_csv;
    let t = format!(
        "{SPEC_HEAD}\nhttps://arxiv.org/abs/2503.01840,H100,1,SGLang,meta-llama/Llama-3.1-8B-Instruct,not stated,1,eagle3,\"chain length 3, no tree\",MT-Bench,MT-Bench,2,\"throughput improvement (x), SGLang w/o spec = 1.00x\",1.00,1.81,not given for this table,\n\
         https://example.org/other,H100,1,SGLang,meta-llama/Llama-3.1-8B-Instruct,not stated,1,eagle3,\"chain length 3, no tree\",MT-Bench,MT-Bench,2,\"throughput improvement (x)\",1.00,1.81,not given,\n"
    );
    let runs = parse_specdec_csv(&t, "t.csv").unwrap();
    let v = rooftop::specdec_runs::evaluate(&runs, "t.csv").unwrap();
    assert_eq!(v.rows.len(), 1);
    let r = &v.rows[0];
    assert_eq!(r.acceptance_from, "runs.toml");
    assert!((r.expected_tokens_per_step - 2.79).abs() < 1e-9);
    assert_eq!(v.overall.n, 0);
    assert_eq!(v.supplied_groups.len(), 1);
    assert_eq!(v.without_acceptance, 1);
    assert_eq!(v.implied.len(), 2);
}

/// SGLang captures its CUDA graphs per batch size, the verify graph holding each sequence's
/// draft tokens: a verify of 64 sequences × 16 tokens (1,024, past its 256) replays a graph
/// where a token-counted limit launches it eagerly, and no plain decode step moves.
#[test]
fn an_engine_that_graphs_per_sequence_replays_the_verify_of_a_captured_batch() {
    let (per_seq, eng, _) = sglang_70b_eagle(&[], &[15], &[64]);
    assert_eq!(
        eng.cuda_graph_counts,
        rooftop::spec::engine::GraphCounts::Sequences
    );
    let (per_token, _, _) = sglang_70b_eagle(&["engine.cuda_graph_counts=tokens"], &[15], &[64]);
    let (a, b) = (&per_seq.points[0], &per_token.points[0]);
    assert_eq!(per_seq.baseline_tpot_ms, per_token.baseline_tpot_ms);
    assert!(
        a.verify_ms < b.verify_ms,
        "graphed verify {} ms vs eager {} ms",
        a.verify_ms,
        b.verify_ms
    );
    // Past the captured batch size both launch eagerly.
    let (big_seq, _, _) = sglang_70b_eagle(&["engine.max_num_seqs=512"], &[3], &[300]);
    let (big_tok, _, _) = sglang_70b_eagle(
        &["engine.max_num_seqs=512", "engine.cuda_graph_counts=tokens"],
        &[3],
        &[300],
    );
    assert!((big_seq.points[0].verify_ms - big_tok.points[0].verify_ms).abs() < 1e-9);
}

/// An EAGLE-3 head's own lm_head over its reduced draft vocabulary (32,000 of Kimi-K2.5's
/// 163,840 tokens, of Llama's 128,256) reads fewer weights and writes fewer logits than the
/// target's lm_head an EAGLE-1/2 head projects through: its draft passes are never slower, and
/// the speculative step with it never loses to the same layer through the full vocabulary at
/// the same running batch.
#[test]
fn a_reduced_draft_vocabulary_never_slows_the_draft() {
    for (m, s, tp) in [
        ("kimi-k2.5-int4", "8x-rtx-pro-6000-pcie", 8),
        ("llama-3.1-8b", "8x-h100-nvlink", 1),
        ("qwen3-30b-a3b", "8x-h100-nvlink", 4),
        ("llama-3.1-70b", "8x-h100-nvlink", 8),
    ] {
        let model = load_model(m).unwrap();
        let head = model.eagle_head.as_ref().unwrap();
        assert!(
            head.draft_vocab_size > 0 && head.draft_vocab_size < model.config.vocab_size,
            "{m}: its EAGLE-3 head states its draft vocabulary"
        );
        let sys = System::load(s).unwrap();
        let sc = Scenario::new(&model, &sys, Parallel::tp(tp)).unwrap();
        let acc = Acceptance(vec![0.8, 0.6, 0.4]);
        let full = specdec(&sc, &Draft::Eagle, &acc, &[1, 3], &C, 2048).unwrap();
        let reduced = specdec(&sc, &Draft::Eagle3, &acc, &[1, 3], &C, 2048).unwrap();
        assert_eq!(full.points.len(), reduced.points.len(), "{m}");
        for (f, r) in full.points.iter().zip(&reduced.points) {
            assert_eq!((f.k, f.concurrency), (r.k, r.concurrency));
            // The head's own lm_head is weights the shared one is not: where the cache
            // binds, a few fewer sequences fit beside it.
            assert!(
                r.running <= f.running && r.running as f64 >= 0.97 * f.running as f64,
                "{m} C={}: {} running against {}",
                r.concurrency,
                r.running,
                f.running
            );
            assert!(
                r.draft_ms < f.draft_ms,
                "{m} k={} C={}: {} ms with the draft vocabulary, {} ms with the target's",
                r.k,
                r.concurrency,
                r.draft_ms,
                f.draft_ms
            );
            if r.running == f.running {
                assert!(r.speedup >= f.speedup, "{m} k={} C={}", r.k, r.concurrency);
            }
        }
    }
}

/// The draft's own layers cache every token of the sequence beside the target's (Kimi-K2.5's
/// EAGLE-3 head attends with 64 key/value heads of 128, BF16: 32 KiB per token over the TP
/// ranks, against the target's replicated MLA latent of 61 x 576 x 2 B = 70,272 B per GPU):
/// where the KV cache binds, fewer sequences run while speculating, by what those bytes say.
#[test]
fn the_drafts_own_cache_lowers_the_sequences_that_fit() {
    let model = load_model("kimi-k2.5-int4").unwrap();
    let sys = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let sc = Scenario::new(&model, &sys, Parallel::tp(8)).unwrap();
    let ctx = 4096;
    let r = specdec(
        &sc,
        &Draft::Eagle3,
        &Acceptance(vec![0.8]),
        &[1],
        &[1 << 20],
        ctx,
    )
    .unwrap();
    let p = &r.points[0];
    let target = sc.memory(1.0, ctx as f64).kv_bytes_per_token_per_gpu;
    assert!((target - 70272.0).abs() < 1.0, "{target}");
    let draft = 64.0 * 128.0 * 2.0 * 2.0 / 8.0;
    // The plain side holds the context, the speculating side one drafted position more and
    // the draft's cache: the ratio of the sequences that fit is that of the bytes per
    // sequence, within the rounding to whole sequences.
    let want = p.plain_running as f64 * (ctx as f64 + 1.0) * target
        / ((ctx as f64 + 2.0) * (target + draft));
    assert!(
        p.running < p.plain_running,
        "{} vs {}",
        p.running,
        p.plain_running
    );
    assert!(
        (p.running as f64 - want).abs() <= 1.0 + 1e-6 * want,
        "{} running, {want:.1} expected from the bytes",
        p.running
    );
}

/// Where the engine's token budget counts decode tokens (vLLM's `max_num_batched_tokens`), a
/// verify pass takes no more sequences than the budget holds at `k + 1` tokens each; SGLang,
/// whose budget bounds prefill chunks only, is not held to it (its cap while speculating is). Before, k = 31 at C = 1,024
/// verified 1,024 x 32 = 32,768 tokens a step against vLLM's 8,192.
#[test]
fn the_verify_pass_stays_within_the_engines_token_budget() {
    let model = load_model("llama-3.1-8b").unwrap();
    for engine in ["vllm-v1", "sglang"] {
        let sys = System::load_with_engine("8x-b200-nvlink", Some(engine), &[]).unwrap();
        let sc = Scenario::new(&model, &sys, Parallel::tp(1)).unwrap();
        let budget = sys.engine.max_num_batched_tokens;
        let r = specdec(
            &sc,
            &Draft::Eagle3,
            &Acceptance(vec![0.7]),
            &[1, 15, 31],
            &[1024],
            512,
        )
        .unwrap();
        for p in &r.points {
            let tokens = p.running * (p.k + 1);
            if sys.engine.mixes_prefill_with_decode() {
                assert!(tokens <= budget, "{engine} k={}: {tokens} > {budget}", p.k);
            }
            assert!(p.running <= p.plain_running, "{engine} k={}", p.k);
        }
        let widest = r.points.iter().find(|p| p.k == 31).unwrap();
        if engine == "vllm-v1" {
            assert_eq!(widest.running, budget / 32);
        } else {
            // Its cap while speculating binds, the same at every draft length.
            let shortest = r.points.iter().find(|p| p.k == 1).unwrap();
            assert_eq!(
                widest.running, shortest.running,
                "sglang is not held to a budget"
            );
        }
    }
}

/// `--draft-tp` is for a separate draft model: asked of a head it is refused as bad usage
/// (before, ignored), and a draft TP the draft model cannot take names the draft. The CSV
/// carries what the JSON does per point: the plain run's sequences and TPOT, and the step.
#[test]
fn draft_tp_is_for_a_draft_model_and_the_csv_carries_the_plain_run() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "specdec",
            "--model",
            "llama-3.1-70b",
            "--system",
            "8x-h100-nvlink",
            "--k",
            "3",
            "--concurrency",
            "1,8",
        ];
        args.extend_from_slice(extra);
        common::output_of(&args)
    };
    let head = run(&["--draft", "eagle3", "--draft-tp", "2"]);
    assert_eq!(head.status.code(), Some(2), "{head:?}");
    assert!(String::from_utf8_lossy(&head.stderr).contains("--draft-tp"));
    let odd = run(&["--draft", "model:llama-3.1-8b", "--draft-tp", "3"]);
    assert_eq!(odd.status.code(), Some(1));
    let e = String::from_utf8_lossy(&odd.stderr);
    assert!(
        e.contains("draft model llama-3.1-8b") && e.contains("--draft-tp 3"),
        "{e}"
    );
    let csv = run(&["--format", "csv"]);
    assert!(csv.status.success());
    let text = String::from_utf8(csv.stdout).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for f in ["plain_running", "plain_tpot_ms", "step_ms"] {
        assert!(header.contains(&f), "{header:?}");
    }
    let col = |row: &str, f: &str| -> f64 {
        let i = header.iter().position(|h| *h == f).unwrap();
        row.split(',').nth(i).unwrap().parse().unwrap()
    };
    for row in lines {
        // TPOT with speculation is the step over the tokens it yields; the speedup is the
        // plain TPOT over it where both run the same sequences.
        let tpot = col(row, "step_ms") / col(row, "expected_tokens_per_step");
        assert!((tpot / col(row, "tpot_ms") - 1.0).abs() < 1e-3, "{row}");
        if col(row, "running") == col(row, "plain_running") {
            let s = col(row, "plain_tpot_ms") / col(row, "tpot_ms");
            assert!((s / col(row, "speedup") - 1.0).abs() < 1e-3, "{row}");
        }
    }
}

/// A model with neither an EAGLE head nor an MTP layer is told what it can draft with, not
/// sent from one missing draft to the other.
#[test]
fn a_missing_draft_names_only_the_drafts_the_model_has() {
    for draft in ["eagle3", "mtp"] {
        let e = common::failure_of(&[
            "specdec",
            "--model",
            "gpt-oss-120b",
            "--system",
            "8x-h100-nvlink",
            "--tp",
            "2",
            "--draft",
            draft,
        ]);
        assert!(e.contains("ngram, model:NAME"), "{draft}: {e}");
        assert!(
            !e.contains("--draft mtp") && !e.contains("--draft eagle3"),
            "{draft}: {e}"
        );
    }
}

/// A specdec flag for another draft or another acceptance statistic is a usage error (exit
/// 2), as --draft-tp without a draft model is: --ngram-cpu-us with a GPU draft, and
/// --acceptance-k with per-position rates (a figure per position needs no draft length).
#[test]
fn specdec_refuses_flags_for_another_draft_or_statistic() {
    for args in [
        vec![
            "specdec",
            "--draft",
            "mtp",
            "--model",
            "deepseek-v3-fp8",
            "--system",
            "8x-h200-nvlink",
            "--ngram-cpu-us",
            "5000",
            "--k",
            "2",
        ],
        vec![
            "specdec",
            "--acceptance",
            "0.8,0.6",
            "--acceptance-k",
            "5",
            "--k",
            "1..3",
        ],
    ] {
        let out = common::output_of(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(args[args.len() - 4]) || err.contains("--acceptance-k"),
            "{err}"
        );
    }
}

/// A runs file's metric is read as its name says: a latency (in s or µs, not only ms) is a
/// time, so a halved latency is a 2x speedup (it was read as a rate: 0.50); a metric that
/// is neither a time, a rate, a ratio nor a percentage gives no speedup. A draft shape that
/// verifies fewer tokens than its acceptance emits is refused, and a speedup above what the
/// row's acceptance allows (a speculative step cheaper than a plain one) is not evaluated.
#[test]
fn specdec_rows_are_read_as_their_metric_says_and_held_to_their_shape() {
    use rooftop::measured::specdec_csv::parse_specdec_csv;
    let row = |tokens: &str, metric: &str, base: f64, spec: f64, acc: &str| {
        format!("https://example.org/run,H100,1,SGLang,meta-llama/Llama-3.1-8B-Instruct,bf16,1,eagle3,{tokens},512,256,1,{metric},{base},{spec},accept_length,{acc}")
    };
    let eval = |r: String| {
        let runs = parse_specdec_csv(&format!("{SPEC_HEAD}\n{r}\n"), "r.csv").unwrap();
        rooftop::specdec_runs::evaluate(&runs, "r.csv")
    };
    for metric in [
        "mean end-to-end latency (s)",
        "inter-token latency (us)",
        "TPOT (ms)",
    ] {
        let v = eval(row("3", metric, 10.0, 5.0, "2.5")).unwrap();
        assert_eq!(v.rows.len(), 1, "{metric}");
        assert!((v.rows[0].measured_speedup - 2.0).abs() < 1e-12, "{metric}");
    }
    let v = eval(row("3", "joules per token", 10.0, 5.0, "2.5")).unwrap();
    assert!(v.rows.is_empty());
    assert!(v.not_evaluated[0].reason.contains("gives no speedup"));
    // 3.9 tokens a step from a verify of 2 tokens
    let e = eval(row(
        "steps=3 topk=1 num_draft=2",
        "throughput (tok/s)",
        100.0,
        150.0,
        "3.9",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("r.csv:2") && e.contains("verifies"), "{e}");
    // 3x the throughput at 1.86 tokens a step
    let v = eval(row("3", "throughput (tok/s)", 100.0, 300.0, "1.86")).unwrap();
    assert!(v.rows.is_empty());
    assert!(
        v.not_evaluated[0].reason.contains("not of one run"),
        "{:?}",
        v.not_evaluated
    );
}
