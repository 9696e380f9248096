//! A configuration that cannot run gets no numbers, in every command: weights that leave no
//! room for a KV cache, one sequence longer than the cache holds or than the model's context
//! window, or a batch larger than the cache holds are refused with `does not fit: <reason>` (exit 1, nothing on stdout), and where a
//! command reports many points (compare, specdec, explore), the ones that cannot run carry
//! the reason in place of their numbers.

use assert_cmd::Command;
use serde_json::Value;

fn rooftop() -> Command {
    Command::cargo_bin("rooftop").unwrap()
}

/// Kimi-K2.5 INT4 over four 96 GB GPUs: 150 GB of weights per GPU.
const TOO_SMALL: [&str; 4] = [
    "--model",
    "kimi-k2.5-int4",
    "--system",
    "4x-rtx-pro-6000-pcie",
];

/// The team's box with 60 GB GPUs: the measurement's own system, its weights no longer fit.
const SHRUNK: [&str; 2] = ["--set", "gpu.memory_capacity=60 GB"];

/// Run `args`; assert a refusal (exit 1, stdout empty, `Error: ... does not fit: ...` on
/// stderr) and return stderr.
fn refused(args: &[&str]) -> String {
    let out = rooftop().args(args).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?} was not refused:\n{stdout}{stderr}"
    );
    assert!(stdout.is_empty(), "{args:?} printed numbers:\n{stdout}");
    assert!(
        stderr.starts_with("Error: ") && stderr.contains("does not fit: "),
        "{args:?}: {stderr}"
    );
    stderr
}

fn with(cmd: &[&str], extra: &[&str]) -> Vec<String> {
    cmd.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn refused_with(cmd: &[&str], extra: &[&str]) -> String {
    let a = with(cmd, extra);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    refused(&a)
}

/// Every single-scenario command asked for one sequence of `tokens` (compare on `system`).
fn every_command_at(tokens: &'static str, system: &'static str) -> Vec<Vec<&'static str>> {
    vec![
        vec!["predict", "--context", tokens],
        vec!["sweep", "--input-len", tokens],
        vec!["specdec", "--context", tokens],
        vec!["sensitivity", "--input-len", tokens],
        vec!["explain", "--assume-input-len", tokens],
        vec!["explore", "--context", tokens],
        vec!["compare", "--systems", system, "--context", tokens],
    ]
}

fn ok(args: &[&str]) -> String {
    let out = rooftop().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    serde_json::from_str(&ok(&a)).unwrap()
}

#[test]
fn weights_that_do_not_fit_are_refused_by_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("chart.png");
    let png = png.to_str().unwrap();
    let weights = "does not fit: weights 150.2 GB per GPU and 4.3 GB reserved exceed the 92.4 GB";
    for cmd in [
        vec!["predict"],
        vec!["predict", "--format", "json"],
        vec!["predict", "--format", "csv"],
        vec!["sweep"],
        vec!["sweep", "--format", "csv"],
        vec!["specdec"],
        vec!["specdec", "--format", "json"],
        vec!["sensitivity"],
        vec!["sensitivity", "--format", "json"],
        vec!["explore", "--parallel", "tp4"],
        vec!["explore", "--parallel", "tp4", "--format", "csv"],
        vec![
            "explore",
            "--parallel",
            "tp4",
            "--pareto",
            "--format",
            "json",
        ],
        vec!["compare", "--systems", "4x-rtx-pro-6000-pcie"],
        vec!["plot", "roofline", "--out", png],
        vec!["plot", "sweep", "--out", png],
        vec!["plot", "breakdown", "--out", png],
        vec!["plot", "breakdown", "--by", "layer", "--out", png],
        vec![
            "plot",
            "breakdown",
            "--by",
            "system",
            "--systems",
            "8x-rtx-pro-6000-pcie,4x-rtx-pro-6000-pcie",
            "--out",
            png,
        ],
        vec![
            "plot",
            "compare",
            "--systems",
            "4x-rtx-pro-6000-pcie",
            "--out",
            png,
        ],
        vec!["plot", "specdec", "--out", png],
    ] {
        let e = refused_with(&cmd, &TOO_SMALL);
        assert!(e.contains(weights), "{cmd:?}: {e}");
        assert!(!std::path::Path::new(png).exists(), "{cmd:?} drew a chart");
    }
    // The measurement's own system with smaller GPUs: validate, calibrate and explain (which
    // read the measurement on the system it names) refuse too.
    for cmd in [
        vec!["validate"],
        vec!["calibrate"],
        vec!["explain"],
        vec!["predict"],
    ] {
        let e = refused_with(&cmd, &SHRUNK);
        assert!(
            e.contains("does not fit: weights 76.2 GB per GPU") && e.contains("54.0 GB"),
            "{cmd:?}: {e}"
        );
    }
}

#[test]
fn one_sequence_longer_than_the_cache_is_refused_by_every_command() {
    // On the team's box the weights fit and 11.9 GB per GPU is left for the KV cache, which
    // holds about 170k tokens: a 250k-token request (within Kimi-K2.5's 262,144-token window)
    // has nowhere to go.
    for args in every_command_at("250000", "8x-rtx-pro-6000-pcie") {
        let e = refused(&args);
        assert!(
            e.contains("does not fit: one sequence of 25") && e.contains("11.90 GB left"),
            "{args:?}: {e}"
        );
    }
}

#[test]
fn a_batch_larger_than_the_cache_holds_is_refused_with_the_largest_that_fits() {
    let e = refused(&["predict", "--batch", "4096"]);
    assert!(
        e.contains("does not fit: 4096 sequences of 1024 tokens need"),
        "{e}"
    );
    let most: u32 = e
        .split("at most ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no largest batch in: {e}"));
    // The largest batch it names runs; one more does not.
    let v = json(&["predict", "--batch", &most.to_string()]);
    assert_eq!(v["memory"]["fits"], true);
    assert!(v["tpot_ms"].as_f64().unwrap() > 0.0);
    refused(&["predict", "--batch", &(most + 1).to_string()]);
    // Twice the context, about half the sequences.
    let e = refused(&["predict", "--batch", "4096", "--context", "2048"]);
    let at_2k: f64 = e
        .split("at most ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(
        (at_2k / most as f64 - 0.5).abs() < 0.02,
        "{at_2k} vs {most}"
    );
    // The serving sweep queues what the cache cannot hold instead: running stops there.
    let v = json(&["sweep", "--concurrency", "4096"]);
    let p = &v["points"][0];
    assert!(p["running"].as_u64().unwrap() < 4096, "{p}");
    assert_eq!(
        p["running"].as_u64().unwrap() + p["queued"].as_u64().unwrap(),
        4096
    );
}

#[test]
fn compare_rows_that_cannot_run_carry_the_reason_and_no_numbers() {
    let systems = "4x-rtx-pro-6000-pcie,8x-rtx-pro-6000-pcie";
    let base = [
        "compare",
        "--systems",
        systems,
        "--concurrency",
        "1,1024",
        "--context",
        "65536",
    ];
    let v = json(&base);
    let rows = v["rows"].as_array().unwrap();
    let (bad, good) = (&rows[0], &rows[1]);
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .starts_with("does not fit: weights 150.2 GB"),
        "{bad}"
    );
    for k in ["tpot_ms", "throughput_tok_s", "sol_tpot_ms", "dominant"] {
        assert_eq!(bad[k], serde_json::json!([]), "{k}: {bad}");
    }
    assert!(bad.get("plateau_tok_s").is_none() && bad["usd_per_million_tokens"].is_null());
    // The box that runs: 1,024 sequences of 64k tokens do not fit in its cache, one does.
    assert!(good["error"].is_null());
    assert_eq!(good["tpot_ms"].as_array().unwrap().len(), 1);
    assert_eq!(good["tpot_ms"][0][0], 1);
    assert_eq!(good["does_not_fit"][0][0], 1024);
    assert!(good["does_not_fit"][0][1]
        .as_str()
        .unwrap()
        .starts_with("does not fit: 1024 sequences of 65536 tokens"));
    assert!(good["plateau_tok_s"].as_f64().unwrap() > 0.0);

    let csv = ok(&with(&base, &["--format", "csv"])
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>());
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let recs: Vec<csv::StringRecord> = rdr.records().map(|r| r.unwrap()).collect();
    for name in [
        "tpot_ms_c1",
        "throughput_tok_s_c1",
        "tpot_ms_c1024",
        "plateau_tok_s",
        "usd_per_million_tokens",
    ] {
        assert_eq!(&recs[0][col(name)], "", "{name}: {csv}");
    }
    assert!(recs[0][col("error")].starts_with("does not fit: weights"));
    assert!(!recs[1][col("tpot_ms_c1")].is_empty());
    assert_eq!(&recs[1][col("tpot_ms_c1024")], "");
    assert_eq!(&recs[1][col("dominant_c1024")], "does not fit");

    let text = ok(&base);
    let row = text
        .lines()
        .find(|l| l.starts_with("4x-rtx-pro-6000-pcie"))
        .unwrap();
    let words: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        words,
        ["4x-rtx-pro-6000-pcie", "tp4", "cannot", "run"],
        "{row}"
    );
    // The reason is written below the table, whole, and does not widen its columns: the
    // header is no wider than the row of numbers.
    let reason = text
        .lines()
        .find(|l| l.starts_with("4x-rtx-pro-6000-pcie tp4: cannot run: does not fit: weights"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(reason.ends_with("the engine may use"), "{reason}");
    let header = text.lines().find(|l| l.starts_with("system")).unwrap();
    let numbers = text
        .lines()
        .find(|l| l.starts_with("8x-rtx-pro-6000-pcie "))
        .unwrap();
    assert_eq!(header.trim_end().len(), numbers.trim_end().len(), "{text}");
    assert!(
        text.contains("8x-rtx-pro-6000-pcie tp8 at C=1024: does not fit: 1024 sequences"),
        "{text}"
    );
}

/// specdec runs C as sweep does: the sequences the KV cache holds run, the rest wait; where
/// not even one sequence fits, it refuses with the reason and prints no table.
#[test]
fn specdec_runs_what_fits_and_refuses_what_cannot_run() {
    let args = ["specdec", "--concurrency", "1,1024", "--context", "32768"];
    let v = json(&args);
    let points = v["points"].as_array().unwrap();
    let at = |c: u64| -> Vec<&serde_json::Value> {
        points.iter().filter(|p| p["concurrency"] == c).collect()
    };
    assert!(at(1).iter().all(|p| p["running"] == 1), "{v}");
    let held = at(1024);
    assert!(!held.is_empty(), "{v}");
    let running = held[0]["running"].as_u64().unwrap();
    assert!((1..1024).contains(&running), "{v}");
    assert_eq!(v["baseline_tpot_ms"].as_array().unwrap().len(), 2);
    let plain = held[0]["plain_running"].as_u64().unwrap();
    assert!(plain >= running, "{v}");
    let text = ok(&args);
    // The draft's own cache may hold fewer sequences with speculation than without.
    let said = if plain == running {
        format!("C = 1024 ({running} running, the rest wait")
    } else {
        format!("C = 1024 ({running} running with speculation, {plain} without, the rest wait")
    };
    assert!(text.contains(&said), "{text}");
    // Past the model's window first; with the window widened, past the cache.
    let e = refused(&["specdec", "--concurrency", "1,8", "--context", "2000000"]);
    assert!(e.contains("context window of 262144 tokens"), "{e}");
    let e = refused(&[
        "specdec",
        "--concurrency",
        "1,8",
        "--context",
        "2000000",
        "--set",
        "model.config.max_position_embeddings=4000000",
    ]);
    // Refused whole at the shortest draft (k = 1), which holds the fewest positions.
    assert!(e.contains("one sequence of 2000001 tokens"), "{e}");
}

/// Qwen3-32B (a 40,960-token window) on eight 80 GB GPUs: memory holds far longer sequences.
const QWEN: [&str; 4] = ["--model", "qwen3-32b", "--system", "8x-h100-nvlink"];

#[test]
fn a_sequence_past_the_models_context_window_is_refused_by_every_command() {
    // explain reads the team's measurement, of Kimi-K2.5: it has its own check below.
    let mut commands: Vec<Vec<&str>> = every_command_at("50000", "8x-h100-nvlink")
        .into_iter()
        .filter(|c| c[0] != "explain")
        .collect();
    let e = refused(&["explain", "--assume-input-len", "300000"]);
    assert!(e.contains("context window of 262144 tokens"), "{e}");
    commands.extend([
        vec!["sweep", "--input-len", "40000", "--output-len", "2000"],
        vec![
            "plan",
            "--gpus",
            "8",
            "--input-len",
            "50000",
            "--output-len",
            "1000",
        ],
    ]);
    for cmd in commands {
        let e = refused_with(&cmd, &QWEN);
        assert!(
            e.contains("longer than qwen3-32b's context window of 40960 tokens")
                && e.contains("config.max_position_embeddings"),
            "{cmd:?}: {e}"
        );
        // No layout lengthens the window: none is suggested.
        assert!(!e.contains("layouts that run it"), "{cmd:?}: {e}");
    }
    // At the window it runs; a user serving with RoPE scaling widens it and is priced.
    let v = json(
        &with(&["predict", "--context", "40960"], &QWEN)
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>(),
    );
    assert_eq!(v["memory"]["fits"], true, "{v}");
    let widened = with(
        &[
            "predict",
            "--context",
            "50000",
            "--set",
            "model.config.max_position_embeddings=131072",
        ],
        &QWEN,
    );
    let v = json(&widened.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert!(v["tpot_ms"].as_f64().unwrap() > 0.0, "{v}");
    // explore counts the points past the window among those that do not fit.
    let out = rooftop()
        .args([
            "explore",
            "--batch",
            "1,8",
            "--context",
            "1024,50000",
            "--format",
            "csv",
        ])
        .args(QWEN)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stdout.lines().skip(1).all(|l| !l.contains(",50000,")),
        "{stdout}"
    );
    assert!(stdout.lines().count() > 1, "{stdout}");
    assert!(
        stderr.contains("context window of 40960 tokens"),
        "{stderr}"
    );
}

#[test]
fn explore_writes_only_points_that_fit_and_counts_the_rest() {
    let args = [
        "explore",
        "--systems",
        "4x-rtx-pro-6000-pcie,8x-rtx-pro-6000-pcie",
        "--batch",
        "1,64,512",
        "--context",
        "1024,65536",
        "--format",
        "csv",
    ];
    let out = rooftop().args(args).output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("skipped: 4x-rtx-pro-6000-pcie tp4 as-shipped: does not fit: weights"),
        "{stderr}"
    );
    assert!(
        stderr.contains("not shown: 3 of 6 points do not fit (in memory or the context window)"),
        "{stderr}"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    // Every written point runs, and every point left out is one predict refuses.
    for b in ["1", "64", "512"] {
        for c in ["1024", "65536"] {
            let written = rows.iter().any(|r| r[3] == b && r[4] == c);
            assert!(rows
                .iter()
                .all(|r| r[0] == "8x-rtx-pro-6000-pcie" && r[8] == "true"));
            let a = ["predict", "--batch", b, "--context", c];
            if written {
                ok(&a);
            } else {
                refused(&a);
            }
        }
    }
}

/// A grid of which no point fits exits 1 with why, never 0 with a header and no rows, in
/// every format (a grid refused whole before any point is priced does the same).
#[test]
fn explore_where_no_point_fits_exits_one_with_why() {
    for format in ["text", "json", "csv"] {
        let out = rooftop()
            .args([
                "explore",
                "--systems",
                "8x-h200-nvlink",
                "--batch",
                "100000",
            ])
            .args(["--context", "100000", "--format", format])
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{format}: {stderr}");
        assert!(
            stderr.contains("no point of the grid fits") && stderr.contains("at most 7 fit"),
            "{format}: {stderr}"
        );
    }
}

/// explore's layouts are its --parallel list and it prices the defaults: a single-layout
/// flag or a calibration would be ignored, so each is bad usage (exit 2) naming the flag.
#[test]
fn explore_refuses_flags_it_would_ignore() {
    for (flag, value) in [("--tp", "4"), ("--dp", "2"), ("--calibration", "x.toml")] {
        let out = rooftop().args(["explore", flag, value]).output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains(&format!("{flag} does not apply to explore")),
            "{stderr}"
        );
    }
}
