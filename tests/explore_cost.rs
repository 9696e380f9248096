//! `explore` in money and energy: every design point carries the watts, joules and dollars
//! `predict` and `compare` read by the same rules, `--objective` ranks by them, and a system
//! with no figure for the objective is refused by name, never ranked on a made-up number.

use serde_json::Value;

mod common;

/// JSON lines of `rooftop explore ARGS --format json`.
fn explore_lines(args: &[&str]) -> Vec<Value> {
    let mut a = vec!["explore"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--format", "json"]);
    common::stdout_of(&a)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn explore_usd_per_million_is_gpus_times_price_over_throughput_as_in_compare() {
    // The front's records are unrounded.
    let v = common::json_of(&[
        "explore",
        "--model",
        "kimi-k2.5-int4",
        "--systems",
        "8x-h200-nvlink,8x-b200-nvlink,8x-rtx-pro-6000-pcie",
        "--batch",
        "1..256:x2",
        "--context",
        "1024,8192",
        "--pareto",
        "--format",
        "json",
    ]);
    let front = v["pareto"].as_array().unwrap();
    assert!(front.len() >= 3, "{v}");
    // compare's buyer rows at a TPOT target: $/Mtok x throughput is the deployment's $/hour
    // per 3600 tokens x 1e6, the same constant at every point of a rented system.
    let c = common::json_of(&[
        "compare",
        "--model",
        "kimi-k2.5-int4",
        "--systems",
        "8x-h200-nvlink,8x-b200-nvlink",
        "--tpot-target",
        "50ms",
        "--objective",
        "cost",
        "--format",
        "json",
    ]);
    let compare_rate = |system: &str| {
        let r = c["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["system"] == system)
            .unwrap();
        f(r, "usd_per_million_output_tokens") * f(r, "throughput_tok_s")
    };
    for p in front {
        let system = p["system"].as_str().unwrap();
        let thr = f(p, "throughput_tok_s");
        let per_gpu_hour = match system {
            "8x-h200-nvlink" => 4.54,
            "8x-b200-nvlink" => 6.03,
            // Owned: 8565 USD over 3 years plus the GPU's watts at 0.13 USD/kWh.
            _ => 8565.0 / (3.0 * 8766.0) + f(p, "watts_per_gpu") / 1e3 * 0.13,
        };
        let want = 8.0 * per_gpu_hour / (thr * 3600.0) * 1e6;
        let got = f(p, "usd_per_million_output_tokens");
        assert!((got - want).abs() < 0.005, "{system}: {got} vs {want}");
        // 1000 in / 1000 out by default: tokens in and out halve the price.
        assert!((f(p, "usd_per_million_total_tokens") - got / 2.0).abs() < 0.005);
        if system != "8x-rtx-pro-6000-pcie" {
            let rate = compare_rate(system);
            assert!(
                (got * thr - rate).abs() < 1e-9 * rate,
                "{system}: explore {} vs compare {rate} $/Mtok x tok/s",
                got * thr
            );
        }
    }
    // --input-len / --output-len set what "total" counts: 3000 in / 1000 out is a quarter.
    let rows = explore_lines(&[
        "--systems",
        "8x-h200-nvlink",
        "--batch",
        "64",
        "--input-len",
        "3000",
        "--output-len",
        "1000",
    ]);
    let r = &rows[0];
    assert!(
        (f(r, "usd_per_million_total_tokens") - f(r, "usd_per_million_output_tokens") / 4.0).abs()
            < 1e-3
    );
}

#[test]
fn explore_energy_per_token_equals_predicts_at_the_same_point() {
    for (parallel, tp, pp) in [("tp8", "8", "1"), ("pp2tp4", "4", "2")] {
        let rows = explore_lines(&[
            "--model",
            "kimi-k2.5-int4",
            "--systems",
            "8x-h200-nvlink",
            "--parallel",
            parallel,
            "--batch",
            "1,64,512",
            "--context",
            "1024,32768",
        ]);
        // Points that do not fit (512 sequences of 32k tokens) are not written.
        assert!(rows.len() >= 4, "{parallel}: {rows:?}");
        for r in &rows {
            let (b, c) = (r["batch"].to_string(), r["context"].to_string());
            let p = common::json_of(&[
                "predict",
                "--model",
                "kimi-k2.5-int4",
                "--system",
                "8x-h200-nvlink",
                "--tp",
                tp,
                "--pp",
                pp,
                "--batch",
                &b,
                "--context",
                &c,
                "--format",
                "json",
            ]);
            let (je, jp) = (f(r, "joules_per_token"), f(&p, "joules_per_token"));
            // explore writes 6 decimals of joules and 1 of watts.
            assert!(
                (je - jp).abs() < 1e-6 + 1e-9 * jp,
                "{parallel} b={b} c={c}: {je} vs {jp}"
            );
            assert!((f(r, "watts_per_gpu") - f(&p, "watts_per_gpu")).abs() <= 0.05);
            assert!((f(r, "tpot_ms") - f(&p, "tpot_ms")).abs() < 1e-5);
        }
    }
}

/// Column `name` of a CSV text, as numbers.
fn column(csv: &str, name: &str) -> Vec<f64> {
    let mut lines = csv.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = header.iter().position(|h| *h == name).unwrap();
    lines
        .map(|l| l.split(',').nth(i).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn objective_cost_ranks_by_usd_per_million_and_finds_the_cheapest() {
    let grid = [
        "explore",
        "--model",
        "kimi-k2.5-int4",
        "--systems",
        "8x-h200-nvlink,8x-b200-nvlink,8x-rtx-pro-6000-pcie",
        "--batch",
        "1..512:x2",
        "--context",
        "1024,8192,32768",
        "--format",
        "csv",
    ];
    let all = column(&common::stdout_of(&grid), "usd_per_million_output_tokens");
    let mut ranked_args = grid.to_vec();
    ranked_args.extend(["--objective", "cost", "--top", "7"]);
    let ranked = column(
        &common::stdout_of(&ranked_args),
        "usd_per_million_output_tokens",
    );
    assert_eq!(ranked.len(), 7);
    assert!(ranked.windows(2).all(|w| w[0] <= w[1]), "{ranked:?}");
    // The best seven of the whole grid, in order.
    let mut sorted = all.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(ranked, sorted[..7].to_vec());
    // Energy ranks by joules per token the same way.
    let mut energy_args = grid.to_vec();
    energy_args.extend(["--objective", "energy"]);
    let j = column(&common::stdout_of(&energy_args), "joules_per_token");
    assert_eq!(j.len(), 20);
    assert!(j.windows(2).all(|w| w[0] <= w[1]), "{j:?}");
}

#[test]
fn the_cost_front_is_usd_against_tokens_per_user_undominated() {
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "--model",
            "kimi-k2.5-int4",
            "--systems",
            "8x-h200-nvlink,8x-rtx-pro-6000-pcie",
            "--batch",
            "1..256:x2",
            "--context",
            "1024..65536:x4",
        ];
        a.extend_from_slice(extra);
        a
    };
    let mut front_args = vec!["explore"];
    front_args.extend(args(&[
        "--objective",
        "cost",
        "--pareto",
        "--format",
        "json",
    ]));
    let v = common::json_of(&front_args);
    let front = v["pareto"].as_array().unwrap();
    assert!(front.len() >= 2, "{v}");
    let usd: Vec<f64> = front
        .iter()
        .map(|p| f(p, "usd_per_million_output_tokens"))
        .collect();
    assert!(usd.windows(2).all(|w| w[0] <= w[1]), "{usd:?}");
    let all = explore_lines(&args(&[]));
    for p in front {
        let (u, t) = (f(p, "usd_per_million_output_tokens"), f(p, "tpot_ms"));
        // No point of the grid is both cheaper and faster per user (rows are rounded to
        // 4 decimals of $ and 6 of ms).
        let dominated = all.iter().any(|q| {
            f(q, "usd_per_million_output_tokens") < u - 1e-3 && f(q, "tpot_ms") < t - 1e-5
        });
        assert!(!dominated, "{p}");
    }
}

#[test]
fn a_system_without_a_price_is_refused_for_objective_cost() {
    let out = assert_cmd::Command::cargo_bin("rooftop")
        .unwrap()
        .args([
            "explore",
            "--model",
            "llama-3.1-8b",
            "--systems",
            "8x-h200-nvlink,8x-l40s-pcie",
            "--batch",
            "1,8",
            "--objective",
            "cost",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for word in [
        "8x-l40s-pcie",
        "price_per_gpu_hour",
        "capital_per_gpu",
        "amortisation",
        "electricity",
    ] {
        assert!(err.contains(word), "{word}: {err}");
    }
    // Without the objective the same system runs, with no cost: null, never a number.
    let rows = explore_lines(&[
        "--model",
        "llama-3.1-8b",
        "--systems",
        "8x-l40s-pcie",
        "--batch",
        "1,8",
    ]);
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert!(r["usd_per_million_output_tokens"].is_null(), "{r}");
        assert!(r["usd_per_million_total_tokens"].is_null(), "{r}");
        assert!(f(r, "joules_per_token") > 0.0);
    }
    // ... and a price given with --set makes it rankable.
    common::stdout_of(&[
        "explore",
        "--model",
        "llama-3.1-8b",
        "--systems",
        "8x-l40s-pcie",
        "--set",
        "system.price_per_gpu_hour=1.50 USD/h",
        "--batch",
        "1,8",
        "--objective",
        "cost",
    ]);
}

#[test]
fn a_tpot_target_keeps_only_the_points_that_meet_it() {
    let args = [
        "--model",
        "kimi-k2.5-int4",
        "--systems",
        "8x-h200-nvlink",
        "--batch",
        "1..1024:x2",
        "--context",
        "1024,32768",
    ];
    let all = explore_lines(&args);
    let mut a = args.to_vec();
    a.extend(["--tpot-target", "30ms"]);
    let met = explore_lines(&a);
    assert!(
        !met.is_empty() && met.len() < all.len(),
        "{} of {}",
        met.len(),
        all.len()
    );
    assert!(met.iter().all(|r| f(r, "tpot_ms") <= 30.0));
    assert_eq!(
        met.len(),
        all.iter().filter(|r| f(r, "tpot_ms") <= 30.0).count()
    );
}

/// The fast path's work (per block kind, attention per context) is the work of the fully
/// evaluated step, at batches on and past the CUDA-graph sizes and with pipelining.
#[test]
fn decode_points_work_is_the_work_of_the_evaluated_step() {
    use rooftop::cost::power::Work;
    use rooftop::cost::{Parallel, Pass};
    use rooftop::predict::Scenario;
    for (model, system, par) in [
        ("kimi-k2.5-int4", "8x-h200-nvlink", "tp8"),
        ("kimi-k2.5-int4", "8x-h200-nvlink", "pp2tp4"),
        ("llama-3.1-70b", "8x-h100-nvlink", "tp4"),
    ] {
        let m = rooftop::spec::registry::load_model(model).unwrap();
        let s = rooftop::spec::System::load(system).unwrap();
        let par: Parallel = par.parse().unwrap();
        let sc = Scenario::new(&m, &s, par).unwrap();
        let ev = sc.evaluator().unwrap();
        let contexts = [1024.0, 9000.0, 65536.0];
        let (mut times, mut works) = (Vec::new(), Vec::new());
        for batch in [1.0, 37.0, 1024.0] {
            ev.decode_points(batch, &contexts, &mut times, Some(&mut works));
            assert_eq!(works.len(), contexts.len());
            for (&c, w) in contexts.iter().zip(&works) {
                let step = ev.evaluate(&Pass::decode(batch, c));
                let want = Work::of(&step, &s.gpu);
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1e-30);
                assert!(
                    close(w.dram_bytes, want.dram_bytes)
                        && close(w.tensor_seconds, want.tensor_seconds),
                    "{model} {system} {par} b={batch} c={c}: {w:?} vs {want:?}"
                );
                assert!(want.dram_bytes > 0.0 && want.tensor_seconds > 0.0);
            }
        }
    }
}

/// explore's Pareto front as CSV is its header and rows on stdout, nothing else: the run's
/// summary goes to stderr, as the streamed rows' does (a trailing `#` line read as a row).
#[test]
fn the_pareto_csv_is_rows_only() {
    let out = common::output_of(&[
        "explore",
        "--batch",
        "1,8,64",
        "--context",
        "1024",
        "--pareto",
        "--format",
        "csv",
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut lines = stdout.lines();
    let width = lines.next().unwrap().split(',').count();
    assert!(
        lines.all(|l| !l.starts_with('#') && l.split(',').count() == width),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("points_evaluated"));
}
