//! The command line at the edges of what a user can ask: one GPU, a 1,024-GPU system, a
//! million tokens of context, 65,536 sequences, a one-layer model, degrees and ranges that
//! overflow a 32-bit count. Each either works (exit 0, finite numbers, nothing on stderr) or
//! is refused with a reason (exit 1, `Error: …` on stderr, nothing on stdout); bad usage exits
//! 2. No JSON record ever carries a NaN or an infinity (serde_json writes them as `null`).

mod common;

use assert_cmd::Command;
use regex::Regex;
use std::path::PathBuf;

fn rooftop() -> Command {
    Command::cargo_bin("rooftop").unwrap()
}

/// What a run came to.
#[derive(Debug, PartialEq)]
enum Outcome {
    Worked(String),
    Refused(String),
}

/// Run, and check the contract of either outcome.
fn run(args: &[&str]) -> Outcome {
    let out = rooftop().args(args).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    match out.status.code() {
        Some(0) => {
            assert!(!stdout.trim().is_empty(), "{args:?}: exit 0 with no output");
            assert_no_non_finite_text(&stdout, args);
            if args.windows(2).any(|w| w == ["--format", "json"]) {
                let v: serde_json::Value = serde_json::from_str(&stdout)
                    .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}):\n{stdout}"));
                assert_json_finite(&v, "", args);
            }
            Outcome::Worked(stdout)
        }
        Some(1) => {
            assert!(
                stdout.is_empty(),
                "{args:?}: refused but printed to stdout:\n{stdout}"
            );
            assert!(
                stderr.starts_with("Error: ") && stderr.trim().len() > "Error:".len(),
                "{args:?}: refused without a reason on stderr:\n{stderr}"
            );
            Outcome::Refused(stderr)
        }
        code => panic!("{args:?}: exit {code:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"),
    }
}

fn works(args: &[&str]) -> String {
    match run(args) {
        Outcome::Worked(s) => s,
        Outcome::Refused(e) => panic!("{args:?} was refused: {e}"),
    }
}

fn refused(args: &[&str], needles: &[&str]) -> String {
    match run(args) {
        Outcome::Refused(e) => {
            for n in needles {
                assert!(e.contains(n), "{args:?}: error lacks \"{n}\":\n{e}");
            }
            e
        }
        Outcome::Worked(s) => panic!("{args:?} worked but should be refused:\n{s}"),
    }
}

fn usage_error(args: &[&str]) {
    let out = rooftop().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    assert!(
        out.stdout.is_empty(),
        "{args:?}: usage error printed to stdout"
    );
}

/// No `NaN` or `inf` word in any output format.
fn assert_no_non_finite_text(s: &str, args: &[&str]) {
    let re = Regex::new(r"(?i)\b(nan|[+-]?inf(inity)?)\b").unwrap();
    if let Some(m) = re.find(s) {
        panic!("{args:?}: output contains \"{}\":\n{s}", m.as_str());
    }
}

fn assert_json_finite(v: &serde_json::Value, path: &str, args: &[&str]) {
    match v {
        serde_json::Value::Null => {
            let key = path.rsplit('.').next().unwrap_or(path);
            assert!(
                common::ABSENT_BY_DESIGN.contains(&key),
                "{args:?}: {path} is null (a NaN or an infinity?)"
            );
        }
        serde_json::Value::Number(n) => {
            let x = n.as_f64().unwrap();
            assert!(x.is_finite(), "{args:?}: {path} = {x}");
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                assert_json_finite(x, &format!("{path}[{i}]"), args);
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                assert_json_finite(x, &format!("{path}.{k}"), args);
            }
        }
        _ => {}
    }
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    serde_json::from_str(&works(&a)).unwrap()
}

/// A built-in description with `replace` applied, written to a temp file.
fn temp_description(builtin: &str, replace: &[(&str, &str)], name: &str) -> String {
    let mut text =
        String::from_utf8(rooftop().args(["show", builtin]).output().unwrap().stdout).unwrap();
    for (from, to) in replace {
        assert!(text.contains(from), "{builtin} has no \"{from}\"");
        text = text.replacen(from, to, 1);
    }
    let dir: PathBuf = tempfile::tempdir().unwrap().keep();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn system_1024() -> String {
    temp_description(
        "8x-h200-nvlink",
        &[("gpu_count = 8", "gpu_count = 1024")],
        "1024x-h200.toml",
    )
}

fn one_layer_dense() -> String {
    temp_description(
        "llama-3.1-8b",
        &[("num_hidden_layers = 32", "num_hidden_layers = 1")],
        "llama-1-layer.toml",
    )
}

fn one_layer_moe() -> String {
    temp_description(
        "deepseek-v3-fp8",
        &[
            ("num_hidden_layers = 61", "num_hidden_layers = 1"),
            ("first_k_dense_replace = 3", "first_k_dense_replace = 0"),
        ],
        "deepseek-1-layer.toml",
    )
}

#[test]
fn one_gpu_works_or_is_refused_for_every_command() {
    for args in [
        vec!["predict", "--tp", "1", "--format", "json"],
        vec![
            "predict",
            "--model",
            "llama-3.1-8b",
            "--system",
            "8x-h100-nvlink",
            "--tp",
            "1",
        ],
        vec!["sweep", "--tp", "1", "--format", "json"],
        vec!["specdec", "--tp", "1", "--format", "json"],
        vec![
            "op", "moe", "--tp", "1", "--tokens", "64", "--format", "json",
        ],
        vec!["op", "attention", "--tp", "1", "--format", "json"],
        vec![
            "op",
            "allreduce",
            "--system",
            "8x-h200-nvlink",
            "--bytes",
            "1 MB",
            "--gpus",
            "1",
            "--format",
            "json",
        ],
    ] {
        run(&args);
    }
    // Kimi-K2.5 on one 96 GB GPU: its weights alone exceed it, so there is no TPOT to give.
    refused(
        &["predict", "--tp", "1"],
        &["does not fit: weights 594.2 GB per GPU"],
    );
}

#[test]
fn a_1024_gpu_system() {
    let sys = system_1024();
    // TP over all 1,024 GPUs cannot divide DeepSeek-V3's 128 heads: refused with the reason.
    refused(
        &["predict", "--system", &sys, "--model", "deepseek-v3-fp8"],
        &["tp 1024 does not divide"],
    );
    // Data-parallel attention with expert parallelism over all of them works.
    let v = json(&[
        "predict",
        "--system",
        &sys,
        "--model",
        "deepseek-v3-fp8",
        "--tp",
        "8",
        "--dp",
        "128",
        "--ep",
        "256",
        "--batch",
        "4096",
    ]);
    assert_eq!(v["gpus"], 1024);
    json(&[
        "sweep",
        "--system",
        &sys,
        "--model",
        "deepseek-v3-fp8",
        "--tp",
        "8",
        "--pp",
        "61",
        "--concurrency",
        "1,64,4096",
    ]);
    let v = json(&["op", "allreduce", "--system", &sys, "--bytes", "16 MB"]);
    assert!(v["time_us"].as_f64().unwrap() > 0.0);
    json(&[
        "specdec",
        "--system",
        &sys,
        "--model",
        "deepseek-v3-fp8",
        "--tp",
        "8",
        "--dp",
        "128",
        // Experts TP-split 1,024 ways would leave 2-wide shards of 128-wide FP8 blocks,
        // which vLLM refuses: expert parallelism as in the predict call above.
        "--ep",
        "256",
        "--draft",
        "mtp",
        "--k",
        "1..3",
        "--acceptance",
        "0.8",
    ]);
}

#[test]
fn a_million_tokens_of_context() {
    let llama = [
        "predict",
        "--model",
        "llama-3.1-8b",
        "--system",
        "8x-h200-nvlink",
        "--context",
        "1000000",
    ];
    // Past Llama-3.1-8B's 131,072-token window: refused, whatever the memory.
    refused(&llama, &["context window of 131072 tokens"]);
    // Widened (a user serving it with RoPE scaling): 1M tokens of KV (128 KiB/token) on 8
    // GPUs is 16 GB per GPU, it fits and is priced.
    let v = json(
        &[
            &llama[..],
            &["--set", "model.config.max_position_embeddings=1048576"],
        ]
        .concat(),
    );
    assert!(v["tpot_ms"].as_f64().unwrap() > 0.0);
    refused(
        &["predict", "--context", "1000000", "--batch", "64"],
        &["does not fit: a sequence of 1000000 tokens", "262144"],
    );
    refused(
        &[
            "predict",
            "--context",
            "1000000",
            "--batch",
            "64",
            "--set",
            "model.config.max_position_embeddings=2000000",
        ],
        &["does not fit: one sequence of 1000000 tokens"],
    );
    // One request of a million tokens needs more KV cache than Kimi on the team's box has:
    // the sweep says it does not fit instead of giving it a number.
    match run(&[
        "sweep",
        "--input-len",
        "1000000",
        "--output-len",
        "1000",
        "--concurrency",
        "1,8",
    ]) {
        Outcome::Refused(e) => assert!(e.contains("does not fit"), "{e}"),
        Outcome::Worked(s) => panic!("a million-token request was given numbers: {s}"),
    }
    refused(
        &["specdec", "--context", "1000000"],
        &["does not fit: a sequence of"],
    );
    json(&["op", "attention", "--context", "1000000", "--batch", "4"]);
}

#[test]
fn a_batch_of_65536() {
    // 65,536 sequences of Kimi-K2.5 at 1k tokens are far more than the team's box holds:
    // refused with how many fit. Llama-3.1-8B at 16 tokens on eight H200s holds them.
    refused(
        &["predict", "--batch", "65536"],
        &[
            "does not fit: 65536 sequences of 1024 tokens",
            "at most 165 fit",
        ],
    );
    let small = [
        "--model",
        "llama-3.1-8b",
        "--system",
        "8x-h200-nvlink",
        "--context",
        "16",
    ];
    let a = json(&[&["predict", "--batch", "65536"][..], &small].concat());
    let b = json(&[&["predict", "--batch", "32768"][..], &small].concat());
    assert!(a["tpot_ms"].as_f64() >= b["tpot_ms"].as_f64());
    // The sweep and specdec queue what the cache cannot hold; predict's batch is a batch.
    json(&["sweep", "--concurrency", "65536"]);
    let sd = json(&["specdec", "--concurrency", "65536"]);
    assert!(sd["points"][0]["running"].as_u64().unwrap() <= 165, "{sd}");
    json(&["op", "moe", "--tokens", "65536"]);
    json(&["op", "attention", "--batch", "65536"]);
    json(&[
        "op", "gemm", "--gpu", "h200", "--m", "65536", "--n", "65536", "--k", "65536",
    ]);
}

#[test]
fn a_one_layer_model() {
    for m in [one_layer_dense(), one_layer_moe()] {
        json(&["predict", "--model", &m, "--system", "8x-h200-nvlink"]);
        json(&[
            "sweep",
            "--model",
            &m,
            "--system",
            "8x-h200-nvlink",
            "--concurrency",
            "1,256",
        ]);
        json(&[
            "op",
            "attention",
            "--model",
            &m,
            "--system",
            "8x-h200-nvlink",
        ]);
        // One layer cannot fill two pipeline stages.
        refused(
            &[
                "predict",
                "--model",
                &m,
                "--system",
                "8x-h200-nvlink",
                "--tp",
                "4",
                "--pp",
                "2",
            ],
            &["pp 2 exceeds the model's 1 layers"],
        );
    }
    json(&[
        "specdec",
        "--model",
        &one_layer_moe(),
        "--system",
        "8x-h200-nvlink",
        "--draft",
        "mtp",
    ]);
    json(&[
        "op",
        "moe",
        "--model",
        &one_layer_moe(),
        "--system",
        "8x-h200-nvlink",
        "--tokens",
        "8",
    ]);
}

#[test]
fn degrees_and_ranges_that_overflow_32_bits_are_refused() {
    // tp × dp wraps to 0 in 32 bits: the layout must not look as if it fitted.
    refused(&["predict", "--tp", "2", "--dp", "2147483648"], &["needs"]);
    refused(&["predict", "--tp", "65536", "--dp", "65536"], &[]);
    refused(&["predict", "--pp", "65536", "--dp", "65536"], &[]);
    refused(&["predict", "--pp", "4294967295"], &[]);
    // A draft-length range of four billion values is refused before it is built: bad
    // usage (exit 2), as every malformed flag value is since values are typed.
    usage_error(&["specdec", "--k", "1..4294967295"]);
    usage_error(&["specdec", "--k", "0..3"]);
    // A zero count is bad usage too (issue 15).
    usage_error(&["specdec", "--concurrency", "0"]);
}

#[test]
fn extreme_sizes_in_the_op_commands() {
    let allreduce = ["op", "allreduce", "--system", "8x-h200-nvlink", "--bytes"];
    for (bytes, why) in [
        // An all-reduce of nothing is no operation (it printed -0.000 us, issue 15).
        ("0", "at least 1 byte"),
        // One past an H200's memory is no collective.
        ("1 TB", "larger than one h200's memory"),
        ("1e300 TB", "--bytes"),
    ] {
        refused(&[&allreduce[..], &[bytes]].concat(), &[why]);
    }
    // The largest buffer an H200 holds is priced.
    json(&[&allreduce[..], &["100 GB"]].concat());
    refused(
        &[
            "op",
            "allreduce",
            "--system",
            "8x-h200-nvlink",
            "--bytes=-1 MB",
        ],
        &["negative"],
    );
    json(&[
        "op", "gemm", "--gpu", "h200", "--m", "1", "--n", "1", "--k", "1",
    ]);
    usage_error(&[
        "op", "gemm", "--gpu", "h200", "--m", "0", "--n", "1", "--k", "1",
    ]);
    usage_error(&[
        "op",
        "allreduce",
        "--system",
        "8x-h200-nvlink",
        "--bytes",
        "1 MB",
        "--gpus",
        "0",
    ]);
    usage_error(&["op", "moe", "--tokens", "0"]);
    usage_error(&["predict", "--batch", "0", "--format", "json"]);
    usage_error(&["sweep", "--input-len", "0", "--output-len", "0"]);
}

#[test]
fn set_overrides_at_the_edges() {
    for (set, ok) in [
        ("gpu.memory_bandwidth=1e300 TB/s", false),
        ("gpu.memory_bandwidth=1e-320 TB/s", false),
        ("gpu.dense_peak.bf16=0 TFLOPS", false),
        ("efficiency.memory=1e-300", false),
        ("engine.kernel_launch=1e308 s", false),
        ("interconnect.p2p_latency=1e308 s", false),
        ("interconnect.bandwidth=1e-300 GB/s", false),
        ("model.config.num_hidden_layers=4294967295", false),
        ("model.config.num_hidden_layers=0", false),
        ("model.published_total_params=nan", false),
        ("system.gpu_count=0", false),
        ("gpu.memory_capacity=1000 TB", true),
        ("gpu.memory_capacity=1001 TB", false),
        ("efficiency.memory=0.001", true),
        ("engine.step_overhead=1 s", true),
        // 10,000 layers of Kimi-K2.5 are 12.6 TB of weights per GPU: no TPOT to give.
        ("model.config.num_hidden_layers=10000", false),
    ] {
        let args = ["predict", "--set", set, "--format", "json"];
        match run(&args) {
            Outcome::Worked(_) => assert!(ok, "--set {set} worked"),
            Outcome::Refused(e) => assert!(!ok, "--set {set} refused: {e}"),
        }
    }
}

#[test]
fn every_error_path_exits_1_with_nothing_on_stdout() {
    let missing = "/nonexistent/rooftop-test/file.toml";
    for args in [
        vec!["predict", "--model", "gpt-5"],
        vec!["predict", "--system", "no-such-system"],
        vec!["predict", "--model", missing],
        vec!["predict", "--calibration", missing],
        vec!["predict", "--set", "nonsense"],
        vec!["predict", "--set", "cpu.cores=4"],
        vec!["predict", "--set", "gpu.memory_bandwidth=fast"],
        vec!["predict", "--tp", "3"],
        vec!["sweep", "--tp", "16"],
        vec![
            "specdec",
            "--model",
            "llama-3.1-8b",
            "--system",
            "8x-h100-nvlink",
            "--draft",
            "mtp",
        ],
        vec!["specdec", "--draft", "model:gpt-5"],
        vec!["validate", "--measured", missing],
        vec!["calibrate", "--measured", missing],
        vec![
            "op",
            "gemm",
            "--gpu",
            "no-such-gpu",
            "--m",
            "1",
            "--n",
            "1",
            "--k",
            "1",
        ],
        vec![
            "op", "gemm", "--gpu", "h200", "--m", "1", "--n", "1", "--k", "1", "--dtype", "int3",
        ],
        vec![
            "op",
            "allreduce",
            "--system",
            "no-such-system",
            "--bytes",
            "1",
        ],
        vec!["show", "no-such-thing"],
        vec!["import-hf", missing],
    ] {
        refused(&args, &[]);
    }
}

#[test]
fn bad_usage_exits_2() {
    for args in [
        vec!["predict", "--batch", "-1"],
        vec!["predict", "--batch", "4294967296"],
        vec!["predict", "--context", "lots"],
        vec!["predict", "--tp"],
        vec!["predict", "--no-such-flag"],
        vec!["sweep", "--concurrency", "1,x"],
        vec!["sweep", "--tpot-def", "median"],
        vec!["specdec", "--acceptance", "1.5"],
        vec!["specdec", "--acceptance", "nan"],
        vec!["specdec", "--draft", "ngram", "--ngram-cpu-us=-5"],
        vec!["specdec", "--draft", "ngram", "--ngram-cpu-us", "nan"],
        vec!["specdec", "--draft", "bogus"],
        vec!["compare", "--systems", "x", "--parallel", "foo"],
        vec!["sensitivity", "--target-tpot", "8"],
        vec!["explore", "--batch", "0,1"],
        vec!["op", "gemm", "--gpu", "h200"],
        vec!["op"],
        vec!["list", "cpus"],
        vec!["frobnicate"],
    ] {
        usage_error(&args);
    }
}

/// Every number documented in the JSON records of predict, sweep, specdec and op is finite,
/// over the built-in models and systems.
#[test]
fn json_records_hold_only_finite_numbers() {
    for (model, system, extra) in [
        ("kimi-k2.5-int4", "8x-rtx-pro-6000-pcie", vec![]),
        ("deepseek-v3-fp8", "8x-h200-nvlink", vec!["--draft", "mtp"]),
        ("gpt-oss-120b", "8x-h100-nvlink", vec!["--draft", "ngram"]),
        ("glm-5-nvfp4", "8x-b200-nvlink", vec!["--draft", "mtp"]),
        ("llama-3.1-8b", "8x-l40s-pcie", vec!["--draft", "ngram"]),
        (
            "qwen3-30b-a3b",
            "8x-rtx-5090-pcie",
            vec!["--draft", "ngram", "--tp", "4"],
        ),
    ] {
        let base = ["--model", model, "--system", system];
        let tp: Vec<&str> = extra
            .windows(2)
            .find(|w| w[0] == "--tp")
            .map(|w| w.to_vec())
            .unwrap_or_default();
        let draft: Vec<&str> = extra
            .windows(2)
            .find(|w| w[0] == "--draft")
            .map(|w| w.to_vec())
            .unwrap_or_default();
        for cmd in [
            vec!["predict", "--batch", "16", "--context", "8192"],
            vec!["sweep", "--concurrency", "1,16,256,4096"],
            vec!["op", "attention", "--batch", "32", "--context", "32768"],
        ] {
            let mut a = cmd.clone();
            a.extend(base);
            a.extend(&tp);
            json(&a);
        }
        if model.contains("kimi") || !draft.is_empty() {
            let mut a = vec!["specdec", "--k", "1..4"];
            a.extend(base);
            a.extend(&tp);
            a.extend(&draft);
            json(&a);
        }
        if model.contains("kimi") || model.contains("deepseek") || model.contains("gpt-oss") {
            let mut a = vec!["op", "moe", "--tokens", "512"];
            a.extend(base);
            a.extend(&tp);
            json(&a);
        }
    }
    for dtype in ["bf16", "fp8", "int8", "int4", "int4-g128", "nvfp4", "mxfp4"] {
        json(&[
            "op",
            "gemm",
            "--gpu",
            "rtx-pro-6000",
            "--m",
            "16",
            "--n",
            "7168",
            "--k",
            "2048",
            "--dtype",
            dtype,
        ]);
    }
}
