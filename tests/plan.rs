//! `rooftop plan`: sizing over aggregated and disaggregated deployments of a GPU budget. Every
//! point of the front meets the targets and fits the budget, none is dominated by another,
//! the front agrees with a brute-force check on random points, and what cannot be planned is
//! refused by name.

mod common;

use rooftop::plan::{pareto, PlanPoint};

fn point(user: f64, gpu: f64, gpus: u32) -> PlanPoint {
    PlanPoint {
        kind: "aggregated",
        deployment: format!("{user}/{gpu}"),
        gpus,
        concurrency: 1,
        tpot_ms: 1e3 / user,
        ttft_ms: 10.0,
        tok_s_per_user: user,
        tok_s_per_gpu: gpu,
        throughput_tok_s: gpu * gpus as f64,
        limited_by: String::new(),
    }
}

/// `plan` of DeepSeek-V3 FP8 on 16 H200 (two HGX nodes), 1k in / 1k out, TPOT at most
/// `target`, with `extra` options.
fn deepseek_plan(target: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "plan",
        "--model",
        "deepseek-v3-fp8",
        "--system",
        "2x8-h200-ib",
        "--input-len",
        "1000",
        "--output-len",
        "1000",
        "--tpot-target",
        target,
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    common::json_of(&args)
}

/// DeepSeek-V3 FP8 over 16 H200 (two HGX nodes), 1k in / 1k out, TPOT at most 50 ms.
#[test]
fn deepseek_on_16_h200_gives_a_front_that_meets_the_target() {
    let v = deepseek_plan("50ms", &[]);
    assert_eq!(v["gpus"], 16);
    assert!(v["disaggregated_evaluated"].as_u64().unwrap() > 0, "{v}");
    assert!(v["aggregated_evaluated"].as_u64().unwrap() > 0, "{v}");
    let front = v["front"].as_array().unwrap();
    assert!(front.len() >= 3, "{v}");
    let f = |p: &serde_json::Value, k: &str| p[k].as_f64().unwrap();
    for p in front {
        assert!(f(p, "tpot_ms") <= 50.0, "{p}");
        assert!(f(p, "gpus") <= 16.0 && f(p, "gpus") >= 8.0, "{p}");
        assert!(
            (f(p, "tok_s_per_user") - 1e3 / f(p, "tpot_ms")).abs() < 1e-6,
            "{p}"
        );
        assert!(!p["limited_by"].as_str().unwrap().is_empty(), "{p}");
        for q in front {
            let dominates = f(q, "tok_s_per_user") >= f(p, "tok_s_per_user")
                && f(q, "tok_s_per_gpu") >= f(p, "tok_s_per_gpu")
                && (f(q, "tok_s_per_user") > f(p, "tok_s_per_user")
                    || f(q, "tok_s_per_gpu") > f(p, "tok_s_per_gpu"));
            assert!(!dominates, "{q} dominates {p}");
        }
    }
    // Fastest per user first, and throughput per GPU rising along it.
    for w in front.windows(2) {
        assert!(f(&w[0], "tok_s_per_user") >= f(&w[1], "tok_s_per_user"));
        assert!(f(&w[0], "tok_s_per_gpu") < f(&w[1], "tok_s_per_gpu"));
    }
    // A tighter target keeps only the front's faster part.
    let tight = deepseek_plan("20ms", &["--aggregated-only"]);
    let tf = tight["front"].as_array().unwrap();
    assert!(!tf.is_empty() && tf.iter().all(|p| f(p, "tpot_ms") <= 20.0));
    assert_eq!(tight["disaggregated_evaluated"], 0);
}

/// The front against a brute-force reading of domination, on seeded random points.
#[test]
fn the_front_is_exactly_the_undominated_points() {
    let mut state = 7u64;
    for _ in 0..50 {
        let pts: Vec<PlanPoint> = (0..40)
            .map(|_| {
                let a = (rooftop::harness::splitmix64(&mut state) % 100) as f64 + 1.0;
                let b = (rooftop::harness::splitmix64(&mut state) % 100) as f64 + 1.0;
                point(a, b, 8)
            })
            .collect();
        let front = pareto(pts.clone());
        let dominated = |p: &PlanPoint| {
            pts.iter().any(|q| {
                q.tok_s_per_user >= p.tok_s_per_user
                    && q.tok_s_per_gpu >= p.tok_s_per_gpu
                    && (q.tok_s_per_user > p.tok_s_per_user || q.tok_s_per_gpu > p.tok_s_per_gpu)
            })
        };
        for p in &front {
            assert!(!dominated(p), "{} on the front but dominated", p.deployment);
        }
        for p in &pts {
            if !dominated(p) {
                assert!(
                    front.iter().any(|f| f.tok_s_per_user == p.tok_s_per_user
                        && f.tok_s_per_gpu == p.tok_s_per_gpu),
                    "{} undominated but not on the front",
                    p.deployment
                );
            }
        }
    }
}

#[test]
fn what_cannot_be_planned_is_refused() {
    // DeepSeek-V3's FP8 weights need more than one H200.
    let e = common::failure_of(&[
        "plan",
        "--model",
        "deepseek-v3-fp8",
        "--system",
        "2x8-h200-ib",
        "--gpus",
        "1",
    ]);
    assert!(
        e.contains("no layout of up to 1 GPUs") && e.contains("need at least"),
        "{e}"
    );
    // Llama-3.1-70B's FP8 weights fit on one H100, with no room left for a sequence's KV
    // cache: the error says so (it said the weights needed at least 1 GPU).
    let e = common::failure_of(&[
        "plan",
        "--model",
        "llama-3.1-70b-fp8",
        "--system",
        "8x-h100-nvlink",
        "--gpus",
        "1",
    ]);
    assert!(
        e.contains("weights fit on 1 GPU(s), but leave too little memory for the KV cache")
            && !e.contains("need at least"),
        "{e}"
    );
    let e = common::failure_of(&["plan", "--system", "2x8-h200-ib", "--tp", "8"]);
    assert!(e.contains("--tp does not apply to plan"), "{e}");
}

/// Bad usage exits 2 (a budget no search is bounded for, a layout flag plan chooses itself);
/// targets nothing meets exit 1 with why in every format, never 0 with no rows.
#[test]
fn plan_refusals_carry_their_exit_codes() {
    let code = |args: &[&str]| {
        let out = common::output_of(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), out.stdout.is_empty(), stderr)
    };
    let base = [
        "plan",
        "--model",
        "llama-3.1-8b",
        "--system",
        "8x-h100-nvlink",
    ];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().chain(extra).copied().collect()
    };
    for gpus in ["65537", "16777216", "4294967295"] {
        let (c, _, e) = code(&with(&["--gpus", gpus]));
        assert_eq!(c, Some(2), "--gpus {gpus}: {e}");
        assert!(e.contains("from 1 to 65536"), "{e}");
    }
    let (c, _, e) = code(&with(&["--tp", "4"]));
    assert_eq!(c, Some(2), "{e}");
    for format in ["text", "json", "csv"] {
        let (c, empty, e) = code(&with(&["--tpot-target", "0.1ms", "--format", format]));
        assert_eq!(c, Some(1), "{format}: {e}");
        assert!(empty, "{format}: printed rows");
        assert!(e.contains("meets the targets (TPOT 0.1 ms"), "{e}");
    }
    // plan offers no --tpot-def, so its refusal of a one-token output does not suggest it.
    let (c, _, e) = code(&with(&["--output-len", "1"]));
    assert_eq!(c, Some(1), "{e}");
    assert!(
        e.contains("at least 2 tokens") && !e.contains("--tpot-def"),
        "{e}"
    );
}

/// The front ends where the target binds, not at a rung of the doubling ladder: the most
/// throughput per GPU within TPOT 50 ms is served at a concurrency one more request per
/// replica of which misses the target. Before, the ladder stopped at C = 1,024 (1,407
/// tok/s per GPU, 45.4 ms), where 1,360 requests (1,697 tok/s per GPU) still met it.
#[test]
fn the_front_ends_where_the_target_binds() {
    let v = deepseek_plan("50ms", &["--aggregated-only"]);
    let front = v["front"].as_array().unwrap();
    let last = front.last().unwrap();
    assert!(last["tpot_ms"].as_f64().unwrap() <= 50.0, "{last}");
    let deployment = last["deployment"].as_str().unwrap();
    // "2 x tp1ep8dp8": replicas of one layout, each serving an equal share of the requests.
    let (replicas, layout) = match deployment.split_once(" x ") {
        Some((n, l)) => (n.parse::<u32>().unwrap(), l),
        None => (1, deployment),
    };
    let c = last["concurrency"].as_u64().unwrap() as u32 / replicas;
    assert!(
        !c.is_power_of_two(),
        "bisected, not a rung: C = {c} per replica"
    );
    let (tp, ep, dp) = (
        layout
            .split("tp")
            .nth(1)
            .unwrap()
            .split(|ch: char| !ch.is_ascii_digit())
            .next()
            .unwrap(),
        layout.split("ep").nth(1).map_or("1", |s| {
            s.split(|ch: char| !ch.is_ascii_digit()).next().unwrap()
        }),
        layout.split("dp").nth(1).map_or("1", |s| {
            s.split(|ch: char| !ch.is_ascii_digit()).next().unwrap()
        }),
    );
    let conc = format!("{c},{}", c + 1);
    let sweep = common::json_of(&[
        "sweep",
        "--model",
        "deepseek-v3-fp8",
        "--system",
        "2x8-h200-ib",
        "--tp",
        tp,
        "--ep",
        ep,
        "--dp",
        dp,
        "--input-len",
        "1000",
        "--output-len",
        "1000",
        "--concurrency",
        &conc,
        "--format",
        "json",
    ]);
    let t = |i: usize| sweep["points"][i]["tpot_ms"].as_f64().unwrap();
    assert!(t(0) <= 50.0 && t(1) > 50.0, "{} then {}", t(0), t(1));
}

/// `plan --client` takes the client as `sweep --client` does, its launch scripts' server
/// settings included (InferenceMAX's SGLang DeepSeek-R1 scripts poll for requests every 30
/// steps from C = 16 and set an FP8 KV cache): a front point is the sweep's point of its
/// layout and concurrency, TTFT and TPOT alike.
#[test]
fn plan_prices_a_client_as_sweep_does() {
    let common = [
        "--model",
        "deepseek-v3-fp8",
        "--system",
        "8x-h200-nvlink",
        "--engine",
        "sglang",
        "--client",
        "inferencemax",
        "--format",
        "json",
    ];
    let mut plan = vec!["plan", "--aggregated-only"];
    plan.extend_from_slice(&common);
    let front = common::json_of(&plan);
    let p = front["front"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["deployment"] == "tp8ep8" && p["concurrency"] == 64)
        .expect("tp8ep8 at C = 64 on the front")
        .clone();
    let mut sweep = vec!["sweep", "--tp", "8", "--ep", "8", "--concurrency", "64"];
    sweep.extend_from_slice(&common);
    let s = common::json_of(&sweep)["points"][0].clone();
    for (a, b) in [("tpot_ms", "tpot_ms"), ("ttft_ms", "ttft_ms")] {
        let (x, y) = (p[a].as_f64().unwrap(), s[b].as_f64().unwrap());
        assert!((x - y).abs() <= 1e-6 * y, "{a}: plan {x}, sweep {y}");
    }
}
