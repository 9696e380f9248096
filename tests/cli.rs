//! The command line as a user meets it: commands, formats, exit codes, and clear errors for
//! bad input (naming the file, the line and the field), never a panic.

use assert_cmd::Command;
use predicates::prelude::*;

mod common;

fn rooftop() -> Command {
    Command::cargo_bin("rooftop").unwrap()
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/bad/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn predict_json_has_the_documented_fields_and_the_breakdown_sums() {
    let out = rooftop()
        .args([
            "predict",
            "--model",
            "kimi-k2.5-int4",
            "--system",
            "8x-rtx-pro-6000-pcie",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    for f in [
        "tpot_ms",
        "sol_tpot_ms",
        "throughput_tok_s",
        "breakdown_ms",
        "memory",
    ] {
        assert!(v.get(f).is_some(), "missing {f}");
    }
    let b = v["breakdown_ms"].as_object().unwrap();
    for c in ["allreduce", "moe", "attention", "gemm", "other"] {
        assert!(b.contains_key(c), "breakdown lacks {c}");
    }
    let sum: f64 = b.values().map(|x| x.as_f64().unwrap()).sum();
    let tpot = v["tpot_ms"].as_f64().unwrap();
    assert!((sum - tpot).abs() < 1e-9 * tpot);
    assert!(v["sol_tpot_ms"].as_f64().unwrap() <= tpot);
    assert!(v["memory"]["weights_per_gpu_gb"].as_f64().unwrap() > 70.0);
}

#[test]
fn predict_csv_has_a_header_and_one_row() {
    let out = rooftop()
        .args(["predict", "--format", "csv", "--batch", "4"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let s = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("model,system,parallel,batch,context,tpot_ms"));
}

#[test]
fn op_commands_report_time_us() {
    for args in [
        vec![
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
            "int4",
            "--format",
            "json",
        ],
        vec![
            "op",
            "allreduce",
            "--system",
            "8x-rtx-pro-6000-pcie",
            "--bytes",
            "14336",
            "--format",
            "json",
        ],
        vec![
            "op",
            "moe",
            "--model",
            "kimi-k2.5-int4",
            "--system",
            "8x-rtx-pro-6000-pcie",
            "--tokens",
            "64",
            "--format",
            "json",
        ],
        vec![
            "op",
            "attention",
            "--model",
            "kimi-k2.5-int4",
            "--system",
            "8x-rtx-pro-6000-pcie",
            "--batch",
            "8",
            "--context",
            "2048",
            "--format",
            "json",
        ],
    ] {
        let out = rooftop()
            .args(&args)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let t = v["time_us"].as_f64().unwrap();
        assert!(
            t > 0.0 && t >= v["sol_time_us"].as_f64().unwrap(),
            "{args:?}"
        );
        assert!(v["bound"].is_string());
    }
}

#[test]
fn allreduce_on_pcie_is_latency_bound_at_decode_sizes() {
    // 8 GPUs on PCIe, NCCL ring LL: the Gen5 link's ring LL latency 4.8 + 14 × 1.3 = 23.0 us
    // (fitted on the L40S tables; NCCL's published 6.6 + 14 × 1.0 = 20.6 us), plus 24.5 KB of
    // bus bytes at LL's quarter of a ~39 GB/s path (~2.5 us): latency-bound.
    let out = rooftop()
        .args([
            "op",
            "allreduce",
            "--system",
            "8x-rtx-pro-6000-pcie",
            "--bytes",
            "14 KB",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let t = v["parts"][0]["time_us"].as_f64().unwrap();
    assert!(t > 23.0 && t < 23.0 * 1.2, "{t}");
    assert_eq!(v["bound"], "latency");
}

#[test]
fn list_and_show() {
    rooftop()
        .args(["list", "models"])
        .assert()
        .success()
        .stdout(predicate::str::contains("kimi-k2.5-int4"));
    rooftop()
        .args(["list", "systems", "--format", "json"])
        .assert()
        .success()
        .stdout(predicate::str::contains("8x-h200-nvlink"));
    rooftop()
        .args(["show", "rtx-pro-6000"])
        .assert()
        .success()
        .stdout(predicate::str::contains("1792 GB/s"));
    rooftop()
        .args(["show", "no-such-thing"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("unknown description"));
}

#[test]
fn bad_usage_exits_2() {
    rooftop()
        .args(["predict", "--batch", "many"])
        .assert()
        .code(2);
    rooftop().args(["frobnicate"]).assert().code(2);
    rooftop()
        .args(["predict", "--format", "yaml"])
        .assert()
        .code(2);
}

fn fails_with(args: &[&str], needles: &[&str]) {
    exits_with(1, args, needles)
}

/// Exit `code` with nothing on stdout, no panic, and each needle on stderr.
fn exits_with(code: i32, args: &[&str], needles: &[&str]) {
    let a = rooftop()
        .args(args)
        .assert()
        .code(code)
        .stdout(predicate::str::is_empty());
    let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "error lacks \"{n}\":\n{err}");
    }
}

#[test]
fn wrong_unit_names_file_line_and_expectation() {
    let f = fixture("gpu-wrong-unit.toml");
    let sys = write_system_with_gpu(&f);
    fails_with(
        &["predict", "--system", &sys],
        &[
            "gpu-wrong-unit.toml",
            "line 7",
            "unknown unit \"GB\"",
            "bandwidth",
        ],
    );
}

#[test]
fn negative_bandwidth_is_refused() {
    let sys = write_system_with_gpu(&fixture("gpu-negative-bandwidth.toml"));
    fails_with(
        &["predict", "--system", &sys],
        &["gpu-negative-bandwidth.toml", "line 7", "negative"],
    );
}

#[test]
fn missing_field_is_named() {
    let sys = write_system_with_gpu(&fixture("gpu-missing-field.toml"));
    fails_with(
        &["predict", "--system", &sys],
        &["gpu-missing-field.toml", "memory_bandwidth"],
    );
}

#[test]
fn top_k_above_expert_count_is_refused_with_its_line() {
    fails_with(
        &[
            "predict",
            "--model",
            &fixture("model-topk-above-experts.toml"),
        ],
        &[
            "model-topk-above-experts.toml:22",
            "num_experts_per_tok",
            "at most n_routed_experts (384), got 400",
        ],
    );
}

#[test]
fn malformed_toml_and_unknown_format_are_refused() {
    fails_with(
        &["predict", "--model", &fixture("model-malformed.toml")],
        &["model-malformed.toml", "line 11"],
    );
    fails_with(
        &["predict", "--model", &fixture("model-unknown-format.toml")],
        &["model-unknown-format.toml", "int3-g32", "expected one of"],
    );
}

#[test]
fn efficiency_above_one_is_refused() {
    fails_with(
        &[
            "predict",
            "--system",
            &fixture("system-efficiency-above-one.toml"),
        ],
        &["system-efficiency-above-one.toml", "outside (0, 1]"],
    );
}

#[test]
fn unknown_names_and_impossible_layouts_are_errors() {
    fails_with(
        &["predict", "--model", "gpt-5"],
        &["unknown model \"gpt-5\"", "kimi-k2.5-int4"],
    );
    fails_with(&["predict", "--tp", "3"], &["tp 3 does not divide"]);
    fails_with(&["predict", "--tp", "16"], &["needs 16 GPUs"]);
    fails_with(
        &["predict", "--model", "llama-3.1-8b", "--ep", "2"],
        &["needs a model with experts"],
    );
    fails_with(
        &[
            "op",
            "allreduce",
            "--system",
            "8x-rtx-pro-6000-pcie",
            "--bytes",
            "lots",
        ],
        &["--bytes"],
    );
}

/// A copy of the team's system that points at a GPU file, in a temp dir.
fn write_system_with_gpu(gpu_path: &str) -> String {
    let dir = tempfile::tempdir().unwrap().keep();
    let text = include_str!("../configs/systems/8x-rtx-pro-6000-pcie.toml")
        .replace("gpu = \"rtx-pro-6000\"", &format!("gpu = \"{gpu_path}\""));
    let p = dir.join("system.toml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// `rooftop op allreduce|allgather|reducescatter|alltoall`: each prices one collective, takes
/// `--gpus` and `--set`, is never faster than its speed of light, and refuses a GPU count the
/// system does not have and a path faster than the link.
#[test]
fn op_collectives_take_gpus_and_set() {
    let time = |args: &[&str]| {
        let v = json_of(args);
        let (t, sol) = (
            v["time_us"].as_f64().unwrap(),
            v["sol_time_us"].as_f64().unwrap(),
        );
        assert!(
            t.is_finite() && t >= sol && sol > 0.0,
            "{args:?}: {t} vs SOL {sol}"
        );
        assert!(v["algorithm"].is_string(), "{args:?}");
        t
    };
    let sys = ["--system", "8x-rtx-pro-6000-pcie", "--bytes", "4 MiB"];
    for family in ["allreduce", "allgather", "reducescatter", "alltoall"] {
        let on = |extra: &[&str]| {
            let mut a = vec!["op", family];
            a.extend(sys);
            a.extend(extra);
            time(&a)
        };
        let (eight, four) = (on(&[]), on(&["--gpus", "4"]));
        // four GPUs stay on one socket: their ring is not slower per bus byte
        assert!(
            four <= eight,
            "{family}: 4 GPUs {four} us, 8 GPUs {eight} us"
        );
        // The team's 8-GPU ring is staged through host memory across sockets (NCCL's SHM
        // transport): a slower staged rate slows it.
        let rate = if family == "alltoall" {
            "system.paths.nccl.staged_cross_socket.alltoall=10 GB/s"
        } else {
            "system.paths.nccl.staged_cross_socket.simple=10 GB/s"
        };
        let slower = on(&["--set", rate]);
        assert!(
            slower > eight,
            "{family}: a slower socket link did not slow it"
        );
        let faster = on(&["--set", "interconnect.bandwidth=128 GB/s"]);
        assert!(
            faster < eight,
            "{family}: a faster link did not speed it up"
        );
        let mut a = vec!["op", family];
        a.extend(sys);
        refused(&a, &["--gpus", "9"], "--gpus must be 1..=8");
    }
    refused(
        &["op", "alltoall", sys[0], sys[1], sys[2], sys[3]],
        &["--set", "system.paths.root_complex=900 GB/s"],
        "paths.root_complex",
    );
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let out = rooftop()
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn refused(args: &[&str], extra: &[&str], why: &str) {
    let out = rooftop().args(args).args(extra).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(why),
        "{args:?} {extra:?}: {err}"
    );
}

/// `--kernels FILE` prices with a generation's constants from a file: a well-formed copy of
/// the built-in changes nothing, a changed constant changes the operator's time, and an
/// impossible one is refused naming the file, line and field.
#[test]
fn kernels_file_replaces_a_generations_constants() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/configs/kernels/blackwell-sm120.toml"
    ))
    .unwrap();
    let op = |kernels: Option<&std::path::Path>| {
        let mut c = Command::cargo_bin("rooftop").unwrap();
        if let Some(k) = kernels {
            c.arg("--kernels").arg(k);
        }
        let out = c
            .args([
                "op",
                "gemm",
                "--gpu",
                "rtx-pro-6000",
                "--m",
                "1",
                "--n",
                "16384",
                "--k",
                "6144",
                "--dtype",
                "bf16",
                "--format",
                "json",
            ])
            .output()
            .unwrap();
        (
            out.status.code(),
            out.stdout,
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let time = |stdout: &[u8]| {
        let v: serde_json::Value = serde_json::from_slice(stdout).unwrap();
        v["time_us"].as_f64().unwrap()
    };
    let (code, base, _) = op(None);
    assert_eq!(code, Some(0));
    let same = dir.path().join("same.toml");
    std::fs::write(&same, &text).unwrap();
    let (code, out, err) = op(Some(&same));
    assert_eq!(code, Some(0));
    assert_eq!(time(&out), time(&base));
    assert!(!err.contains("changed no number"), "{err}");
    // A file for a generation the run never prices says so (it was read without a word).
    let ada = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/kernels/ada.toml");
    let (code, out, err) = op(Some(std::path::Path::new(ada)));
    assert_eq!(code, Some(0));
    assert_eq!(time(&out), time(&base));
    assert!(
        err.contains("ada.toml") && err.contains("changed no number"),
        "{err}"
    );
    // BF16 weights streamed at half the fraction take about twice as long.
    let i = text.find("[gemm.bf16]").unwrap();
    let slow = text[..i].to_string()
        + &text[i..].replacen("memory_fraction = 0.8", "memory_fraction = 0.4", 1);
    let slower = dir.path().join("slow.toml");
    std::fs::write(&slower, slow).unwrap();
    let (_, out, _) = op(Some(&slower));
    assert!(
        time(&out) > 1.7 * time(&base),
        "{} vs {}",
        time(&out),
        time(&base)
    );
    let bad = text[..i].to_string()
        + &text[i..].replacen("memory_fraction = 0.8", "memory_fraction = 1.8", 1);
    let badf = dir.path().join("bad.toml");
    std::fs::write(&badf, bad).unwrap();
    let (code, _, err) = op(Some(&badf));
    assert_eq!(code, Some(1));
    assert!(
        err.contains("bad.toml") && err.contains("gemm.bf16.memory_fraction"),
        "{err}"
    );
}

/// With one output token there is no inter-token latency: the sweep refuses to print one
/// (it printed a 2,236 ms "ITL") and names what it can give instead.
#[test]
fn one_output_token_has_no_itl() {
    fails_with(
        &["sweep", "--output-len", "1", "--concurrency", "4"],
        &["no inter-token latency", "--tpot-def e2e"],
    );
    rooftop()
        .args(["sweep", "--output-len", "1", "--concurrency", "4"])
        .args(["--tpot-def", "e2e"])
        .assert()
        .success();
}

/// Numbers that were printed without a word and are now refused or fixed (each failed
/// before its fix): every measurement below half its hardware bound is refused naming its
/// row; a validation with nothing evaluated fails; a collective over one GPU costs +0.
#[test]
fn measurements_faster_than_light_are_refused_naming_the_row() {
    let h100 = ["--system", "8x-h100-nvlink", "--model", "llama-3.1-8b"];
    // A GEMM of 2^32 cubed in 10 us, which `calibrate` fitted and wrote.
    let gemm = fixture("gemm-faster-than-light.csv");
    fails_with(
        &[&["calibrate", "--measured", &gemm][..], &h100].concat(),
        &["gemm-faster-than-light.csv:2", "speed-of-light bound"],
    );
    // Kernel-table rows of 0.1 ns whose data fits in L2 (their floor was zero).
    for table in ["moe_h100-sxm.csv", "attention_decode_h100-sxm.csv"] {
        let f = fixture(table);
        fails_with(
            &["validate", "--system", "8x-h100-nvlink", "--measured", &f],
            &[&format!("{table}:2")],
        );
    }
    // An e2e run with a TPOT of 0.0001 ms.
    let e2e = fixture("e2e-tpot-faster-than-light.csv");
    fails_with(
        &["validate", "--measured", &e2e],
        &["e2e-tpot-faster-than-light.csv:2", "fastest decode step"],
    );
    // An all-reduce over more GPUs than the system has.
    let nccl = format!(
        "{}/tests/fixtures/measured/nccl_no_gpu_count.log",
        env!("CARGO_MANIFEST_DIR")
    );
    fails_with(
        &[
            &["validate", "--measured", &nccl, "--nccl-gpus", "64"][..],
            &h100,
        ]
        .concat(),
        &["over 64 GPUs, but 8x-h100-nvlink has 8"],
    );
}

#[test]
fn a_validation_that_evaluates_nothing_fails_and_says_why() {
    let f = fixture("e2e-every-run-skipped.csv");
    for format in ["text", "csv", "json"] {
        fails_with(
            &["validate", "--measured", &f, "--format", format],
            &[
                "none of its 1 runs could be evaluated",
                "no description of nobody/none",
            ],
        );
    }
}

#[test]
fn a_collective_over_one_gpu_costs_nothing_without_a_minus_sign() {
    let out = rooftop()
        .args([
            "op",
            "allreduce",
            "--system",
            "8x-h100-nvlink",
            "--bytes",
            "1 MB",
            "--gpus",
            "1",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("-0.0"), "{text}");
    assert!(text.contains("time 0.000 us"), "{text}");
}

/// A calibration fitted on one GPU and link is refused once `--set` swaps either: it was
/// applied silently after `--set system.gpu=h200` (only a renamed system was refused).
#[test]
fn a_calibration_is_refused_when_set_swaps_the_gpu_or_the_link() {
    let cal = team_calibration();
    rooftop()
        .args(["predict", "--calibration", &cal])
        .assert()
        .success();
    for (set, what) in [
        ("system.gpu=h200", "GPU rtx-pro-6000 (this run: h200)"),
        (
            "system.interconnect=pcie-gen6-x16",
            "interconnect pcie-gen5-x16",
        ),
    ] {
        fails_with(&["predict", "--calibration", &cal, "--set", set], &[what]);
    }
}

/// A `--set` of a field a calibration's parameter takes the place of is refused: with
/// `--calibration`, `--set efficiency.memory=0.5` printed the calibrated TPOT unchanged. A
/// field no parameter replaces (the GPU's bandwidth) still moves the prediction.
#[test]
fn a_set_that_a_calibration_would_override_is_refused() {
    let cal = team_calibration();
    let tpot = |extra: &[&str]| -> f64 {
        let mut args = vec!["predict", "--calibration", &cal];
        args.extend_from_slice(extra);
        json_of(&args)["tpot_ms"].as_f64().unwrap()
    };
    let base = tpot(&[]);
    assert!(tpot(&["--set", "gpu.memory_bandwidth=1.0 TB/s"]) > base);
    for (set, parameter) in [
        ("efficiency.memory=0.5", "memory_efficiency"),
        ("system.efficiency.gemm.int4=0.3", "gemm_efficiency_int4"),
        ("engine.kernel_gap=5 us", "kernel_gap_us"),
        ("system.step_overhead=900 us", "step_overhead_us"),
    ] {
        exits_with(
            2,
            &["predict", "--calibration", &cal, "--set", set],
            &[set, parameter, "would change nothing"],
        );
    }
    // Without the calibration the same --set moves the number.
    let default = json_of(&["predict"])["tpot_ms"].as_f64().unwrap();
    let slower = json_of(&["predict", "--set", "efficiency.memory=0.5"])["tpot_ms"]
        .as_f64()
        .unwrap();
    assert!(slower > default, "{slower} vs {default}");
}

/// A `compare` row's own `[key=value]` overrides are `--set`s of that row: one a calibrated
/// row's parameter replaces is refused as the flag is, one it does not still moves the row.
#[test]
fn a_compare_row_override_that_a_calibration_would_override_is_refused() {
    let cal = team_calibration();
    exits_with(
        2,
        &[
            "compare",
            "--calibration",
            &cal,
            "--systems",
            "8x-rtx-pro-6000-pcie[efficiency.memory=0.5]",
            "--concurrency",
            "1",
        ],
        &[
            "efficiency.memory=0.5",
            "memory_efficiency",
            "would change nothing",
        ],
    );
    let tpot = |system: &str| -> f64 {
        json_of(&[
            "compare",
            "--calibration",
            &cal,
            "--systems",
            system,
            "--concurrency",
            "1",
        ])["rows"][0]["tpot_ms"][0][1]
            .as_f64()
            .unwrap()
    };
    let base = tpot("8x-rtx-pro-6000-pcie");
    assert!(tpot("8x-rtx-pro-6000-pcie[gpu.memory_bandwidth=1.0 TB/s]") > base);
}

/// The README's deployment example is a file `--deployment` reads: its `kv_link` sat after
/// `[decode]`, where TOML makes it `decode.kv_link`, and the example failed to load. It prices
/// as the same pools given by flags.
#[test]
fn the_readme_deployment_example_loads_and_matches_the_flags() {
    let readme = include_str!("../README.md");
    let start = readme
        .find("kv_link = \"cx7-8x400g\"  # or a path")
        .expect("README deployment example");
    let end = start + readme[start..].find("```").expect("block closes");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deploy.toml");
    std::fs::write(&file, &readme[start..end]).unwrap();
    let common = [
        "sweep",
        "--model",
        "deepseek-v3-fp8",
        "--system",
        "8x-h200-nvlink",
        "--concurrency",
        "64",
    ];
    let mut from_file = common.to_vec();
    from_file.extend(["--deployment", file.to_str().unwrap()]);
    let mut from_flags = common.to_vec();
    from_flags.extend([
        "--prefill",
        "workers=1,tp=8,ep=8",
        "--decode",
        "workers=2,dp=8,ep=8,batch=64",
        "--kv-link",
        "cx7-8x400g",
    ]);
    assert_eq!(json_of(&from_file), json_of(&from_flags));
}

/// `--kv-link` without a disaggregated deployment is a usage error: an aggregated sweep or
/// comparison accepted it, even a name that is no link, and printed its usual numbers.
#[test]
fn a_kv_link_without_a_deployment_is_refused() {
    for args in [
        &["sweep", "--concurrency", "1", "--kv-link", "nonexist"][..],
        &["sweep", "--concurrency", "1", "--kv-link", "cx7-8x400g"][..],
        &[
            "compare",
            "--systems",
            "8x-h200-nvlink",
            "--concurrency",
            "1",
            "--kv-link",
            "cx7-8x400g",
        ][..],
    ] {
        exits_with(
            2,
            args,
            &["--kv-link applies to a disaggregated deployment only"],
        );
    }
}

/// A kernel table with a second time column, or a row with more fields than its header, is
/// refused naming the line: `validate` read `latency_ms` and ignored a `time_us` beside it
/// (500 us against 20 us), where `calibrate` refused the same file, and it took a row whose
/// values no longer sit under their titles.
#[test]
fn a_kernel_table_with_two_times_or_a_ragged_row_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, needle) in [
        (
            "gemm_two.csv",
            "m,n,k,dtype,latency_ms,time_us\n16,7168,2048,bf16,0.02,500\n",
            "gemm_two.csv:1: two latency columns, `latency_ms` and `time_us`",
        ),
        (
            "gemm_ragged.csv",
            "m,n,k,dtype,latency_ms\n16,7168,2048,bf16,0.02\n16,7168,2048,bf16,0.02,extra\n",
            "gemm_ragged.csv:3: 6 fields where the header has 5 columns",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        for command in ["validate", "calibrate"] {
            fails_with(
                &[
                    command,
                    "--system",
                    "8x-h100-nvlink",
                    "--model",
                    "llama-3.1-8b",
                    "--measured",
                    path.to_str().unwrap(),
                ],
                &[needle],
            );
        }
    }
}

/// The client's in-flight limits hold in both loops. A disaggregated deployment ignored the
/// connection cap (aiohttp's 100: a decode batch of 510 and 12,557 tok/s at C = 512); the
/// aggregated loop let more requests run or queue than a run of 1,000 prompts sends.
#[test]
fn the_clients_in_flight_limits_hold_in_both_loops() {
    // The first point of `sweep` with `args` at concurrency `c`.
    let point = |args: &str, c: &str| {
        let mut a: Vec<&str> = vec!["sweep", "--concurrency", c];
        a.extend(args.split(' '));
        json_of(&a)["points"][0].clone()
    };
    let disagg = "--model deepseek-v3-fp8 --system 8x-h200-nvlink --prefill workers=1,tp=8,ep=8 \
                  --decode workers=1,dp=8,ep=8 --client aiohttp-default";
    let disagg = disagg.split_whitespace().collect::<Vec<_>>().join(" ");
    let (at_cap, past) = (point(&disagg, "100"), point(&disagg, "512"));
    assert_eq!(past["in_flight"].as_u64(), Some(100));
    assert_eq!(past["throughput_tok_s"], at_cap["throughput_tok_s"]);
    assert_eq!(past["decode_batch"], at_cap["decode_batch"]);
    // The 412 waiting for a connection wait 412 / rate each, in the queue term.
    let rate = past["request_rate_req_s"].as_f64().unwrap();
    let extra = past["queue_ms"].as_f64().unwrap() - at_cap["queue_ms"].as_f64().unwrap();
    assert!(
        (extra - 412.0 / rate * 1e3).abs() < 1e-6 * extra,
        "{extra} ms"
    );
    let agg = "--model llama-3.1-8b --system 8x-h100-nvlink --tp 8 --client vllm-bench-serve \
               --input-len 100 --output-len 100";
    let agg = agg.split_whitespace().collect::<Vec<_>>().join(" ");
    let (all, more) = (point(&agg, "1000"), point(&agg, "2000"));
    assert_eq!(more["running"].as_u64(), Some(1000));
    assert_eq!(more["queued"].as_u64(), Some(0));
    assert_eq!(more["concurrency"].as_u64(), Some(2000));
    assert_eq!(more["ttft_ms"], all["ttft_ms"]);
}

/// `engine.chunked_prefill = false` reaches the closed loop of an engine that mixes prefill
/// into decode steps: a prompt past the token budget runs whole in one step instead of in
/// budget-sized chunks (the flag changed nothing before), and a prompt within the budget is
/// priced the same either way.
#[test]
fn chunked_prefill_off_prices_a_long_prompt_whole() {
    let ttft = |engine: &str, input: &str, chunked: &str| {
        let args = [
            "sweep",
            "--engine",
            engine,
            "--concurrency",
            "1",
            "--input-len",
            input,
            "--output-len",
            "200",
            "--set",
            chunked,
        ];
        json_of(&args)["points"][0]["ttft_ms"].as_f64().unwrap()
    };
    for engine in ["vllm-v1", "trtllm"] {
        let (on, off) = (
            ttft(engine, "20000", "engine.chunked_prefill=true"),
            ttft(engine, "20000", "engine.chunked_prefill=false"),
        );
        // Three steps of chunks against one whole step: fewer steps' fixed costs.
        assert!(off < on && off > 0.9 * on, "{engine}: {off} vs {on} ms");
        assert_eq!(
            ttft(engine, "2000", "engine.chunked_prefill=true"),
            ttft(engine, "2000", "engine.chunked_prefill=false"),
            "{engine}"
        );
    }
}

/// What a refusal and a calibration say about request lengths is what they used: a row
/// that states 1,024 in / 256 out was refused "at prompt 32 / output 32 where the file does
/// not say", and calibrate printed "assumed: prompt 32, output 32" when every point gave its
/// lengths.
#[test]
fn messages_name_the_request_lengths_they_used() {
    let dir = tempfile::tempdir().unwrap();
    let vllm = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/measured/vllm_c8.json"
    ))
    .unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&vllm).unwrap();
    v["max_concurrency"] = serde_json::Value::Null;
    let path = dir.path().join("vllm_null.json");
    std::fs::write(&path, v.to_string()).unwrap();
    let err = common::failure_of(&["validate", "--measured", path.to_str().unwrap()]);
    assert!(
        err.contains("prompt 1024 / output 256 tokens") && !err.contains("assume"),
        "{err}"
    );
    let toml = "system = \"8x-rtx-pro-6000-pcie\"\nmodel = \"kimi-k2.5-int4\"\n\
                source = \"synthetic\"\ntpot_definition = \"itl\"\n\n\
                [[points]]\nconcurrency = 1\ninput_len = 8000\noutput_len = 100\n\
                tpot = \"14 ms\"\n\n[[points]]\nconcurrency = 8\ninput_len = 8000\n\
                output_len = 100\ntpot = \"70 ms\"\nthroughput = \"110 tok/s\"\n";
    let stated = dir.path().join("stated.toml");
    std::fs::write(&stated, toml).unwrap();
    let out = common::stdout_of(&["calibrate", "--measured", stated.to_str().unwrap()]);
    assert!(
        out.contains("every serving point gives its request lengths") && !out.contains("assumed"),
        "{out}"
    );
    // The team's own measurement leaves lengths to the assumptions, and says so.
    assert!(common::stdout_of(&["calibrate"]).contains("assumed where the data is silent"));
}

/// A GEMM micro-benchmark is priced as `op gemm` prices the call, its kernels' fixed cost
/// included: a `time_us` file's default was 3 us below `op gemm` and the kernel-table reader
/// on the same shape (11.07 against 14.07 us).
#[test]
fn a_gemm_micro_benchmark_is_priced_as_op_gemm() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gemm_us.csv");
    std::fs::write(&file, "m,n,k,dtype,time_us\n16,7168,2048,bf16,20\n").unwrap();
    let run = |line: &str| json_of(&line.split(' ').collect::<Vec<_>>());
    let on_h100 = "--system 8x-h100-nvlink";
    let v = run(&format!(
        "validate {on_h100} --model llama-3.1-8b --measured {}",
        file.display()
    ));
    let op = run(&format!(
        "op gemm --gpu h100-sxm {on_h100} --m 16 --n 7168 --k 2048"
    ));
    let default_us = v["rows"][0]["default"].as_f64().unwrap() * 1e6;
    let op_us = op["time_us"].as_f64().unwrap();
    assert!(
        (default_us - op_us).abs() < 1e-9 * op_us,
        "{default_us} vs {op_us}"
    );
}

/// A disaggregated sweep's KV bytes per token of a decode replica are its whole cache,
/// whatever its pipeline split: DeepSeek-V3's 61 layers over two stages were reported as the
/// larger stage's 31 twice (71,424 where 61 x 1,152 = 70,272 B).
#[test]
fn a_decode_replicas_kv_bytes_do_not_depend_on_its_pipeline_split() {
    let bytes = |decode: &str| {
        let line = format!(
            "sweep --model deepseek-v3-fp8 --system 8x-h200-nvlink --prefill workers=1,tp=8 \
             --decode {decode} --concurrency 4"
        );
        json_of(&line.split_whitespace().collect::<Vec<_>>())["kv_bytes_per_token"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(bytes("workers=1,tp=1,dp=8,ep=8"), 61.0 * 1152.0);
    assert_eq!(bytes("workers=1,tp=1,dp=4,pp=2"), 61.0 * 1152.0);
}

/// `compare` with a latency target says where each row meets it, in every format: the text
/// and CSV printed only the plateau's cost (the RTX box's at a 575 ms TPOT under a 50 ms
/// target, ranking it cheaper); a plateau held by a cap is read at its lowest concurrency,
/// not at the largest one that only queues; and an `explore` whose every point misses the
/// target exits 1 instead of 0 with no rows.
#[test]
fn targets_are_read_where_they_are_met() {
    let run = |line: &str| -> Vec<String> { line.split(' ').map(String::from).collect() };
    let compare = "compare --model llama-3.1-70b --systems 8x-h100-nvlink,8x-rtx-pro-6000-pcie";
    let args = run(&format!("{compare} --tpot-target 50ms"));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = common::stdout_of(&a);
    assert!(text.contains("at target $/M tok"), "{text}");
    let v = json_of(&a);
    for row in v["rows"].as_array().unwrap() {
        let t = &row["at_target"];
        assert!(t["tpot_ms"].as_f64().unwrap() <= 50.0, "{row}");
    }
    let args = run("compare --model llama-3.1-70b --systems 8x-a100-nvlink --objective throughput");
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let best = &json_of(&a)["rows"][0];
    let args = run("sweep --model llama-3.1-70b --system 8x-a100-nvlink --concurrency 256");
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let at_256 = &json_of(&a)["points"][0];
    assert!(best["concurrency"].as_u64().unwrap() <= 256, "{best}");
    assert_eq!(best["throughput_tok_s"], at_256["throughput_tok_s"]);
    // (The streamed CSV header is out before the grid is priced, as where nothing fits.)
    let args = run(
        "explore --model llama-3.1-70b --system 8x-h100-nvlink --batch 1..16:x2 --tpot-target 1ms",
    );
    let out = common::output_of(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no point of the grid meets the TPOT target"),
        "{err}"
    );
}

/// A calibration's in-flight cap holds `specdec` as it holds `sweep`: a fit to a flat
/// throughput curve (about 7 requests in flight) gave `sweep` 6 running at C = 64 and
/// `specdec` 64, against an uncapped baseline.
#[test]
fn specdec_runs_no_more_than_a_calibrations_in_flight_cap() {
    let dir = tempfile::tempdir().unwrap();
    let mut toml = String::from(
        "system = \"8x-rtx-pro-6000-pcie\"\nmodel = \"kimi-k2.5-int4\"\nsource = \"synthetic\"\n\
         tpot_definition = \"itl\"\n",
    );
    for (c, what) in [
        (1, "tpot = \"12.5 ms\""),
        (8, "tpot = \"25 ms\""),
        (16, "throughput = \"400 tok/s\""),
        (32, "throughput = \"400 tok/s\""),
        (64, "throughput = \"400 tok/s\""),
    ] {
        toml.push_str(&format!(
            "\n[[points]]\nconcurrency = {c}\ninput_len = 1000\noutput_len = 1000\n{what}\n"
        ));
    }
    let measured = dir.path().join("flat.toml");
    std::fs::write(&measured, toml).unwrap();
    let cal = dir.path().join("cal.toml");
    let (m, c) = (measured.to_str().unwrap(), cal.to_str().unwrap());
    common::stdout_of(&["calibrate", "--measured", m, "--out", c]);
    use rooftop::calibration::Calibration;
    let sys = rooftop::spec::System::load("8x-rtx-pro-6000-pcie").unwrap();
    let cap = Calibration::from_text(&std::fs::read_to_string(&cal).unwrap(), c)
        .unwrap()
        .params(&rooftop::cost::CostParams::default_for(&sys))
        .inflight_cap
        .expect("the flat curve fits an in-flight cap");
    assert!(cap < 32.0, "{cap}");
    let v = json_of(&[
        "specdec",
        "--calibration",
        c,
        "--draft",
        "eagle3",
        "--k",
        "1",
        "--acceptance",
        "0.7",
        "--concurrency",
        "64",
    ]);
    let p = &v["points"][0];
    for side in ["running", "plain_running"] {
        let n = p[side].as_u64().unwrap() as f64;
        assert!((n - cap).abs() <= 1.0, "{side} {n} against the cap {cap}");
    }
}

/// A measured TTFT is priced at its point's own output length: the reader dropped it and the
/// fit priced the TTFT at the assumed 32 tokens while the same point's TPOT used 1,000 (the
/// output length sets how many of the loop's requests decode while a prompt waits).
#[test]
fn a_measured_ttft_is_priced_at_its_own_output_length() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ttft.toml");
    std::fs::write(
        &file,
        "system = \"8x-rtx-pro-6000-pcie\"\nmodel = \"kimi-k2.5-int4\"\nsource = \"synthetic\"\n\
         tpot_definition = \"itl\"\n\n[[points]]\nconcurrency = 8\ninput_len = 1000\n\
         output_len = 1000\ntpot = \"25 ms\"\nttft = \"900 ms\"\n",
    )
    .unwrap();
    let v = json_of(&["validate", "--measured", file.to_str().unwrap()]);
    let row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["point"] == "TTFT C=8")
        .expect("the TTFT row")
        .clone();
    let sweep = |out: &str| {
        json_of(&[
            "sweep",
            "--input-len",
            "1000",
            "--output-len",
            out,
            "--concurrency",
            "8",
        ])["points"][0]["ttft_ms"]
            .as_f64()
            .unwrap()
    };
    let priced = row["default"].as_f64().unwrap() * 1e3;
    assert!(
        (priced - sweep("1000")).abs() < 1e-6 * priced,
        "{priced} ms"
    );
    assert!((priced - sweep("32")).abs() > 1e-3 * priced, "{priced} ms");
}

/// A calibration whose covariance holds a negative variance is refused naming that
/// parameter: the correlations were checked row by row first, so a bad variance in the last
/// row (step overhead) was reported against the first (memory efficiency).
#[test]
fn a_negative_variance_is_refused_naming_its_own_parameter() {
    let text = std::fs::read_to_string(team_calibration()).unwrap();
    let mut doc: toml::Table = toml::from_str(&text).unwrap();
    let names: Vec<String> = doc["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let last = names.len() - 1;
    let cov = doc.get_mut("covariance").unwrap().as_array_mut().unwrap();
    cov[last].as_array_mut().unwrap()[last] = toml::Value::Float(-1.0);
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("negative-variance.toml");
    std::fs::write(&bad, toml::to_string(&doc).unwrap()).unwrap();
    let needle = format!("covariance (row {}, {})", last + 1, names[last]);
    fails_with(
        &["predict", "--calibration", bad.to_str().unwrap()],
        &[&needle],
    );
}

/// A collective's message is a whole number of bytes that fits in its GPU: `--bytes 7.5`
/// and `--bytes 1e30` (7.5e25 us) were priced.
#[test]
fn a_collective_message_is_whole_bytes_that_fit_in_a_gpu() {
    let op = ["op", "allreduce", "--system", "8x-h100-nvlink", "--bytes"];
    for (bytes, why) in [
        ("7.5", "in whole bytes"),
        ("1e30", "larger than one h100-sxm's memory"),
    ] {
        fails_with(&[&op[..], &[bytes]].concat(), &[why]);
    }
    rooftop().args(op).arg("1.5 KB").assert().success();
}

/// Rows of a comparison are told apart by their labels: an empty `label=`, two labels for
/// one system and one label for two systems are usage errors (a blank row name, the second
/// label kept silently, and two rows of one name were printed).
#[test]
fn comparison_rows_need_distinct_labels() {
    for (systems, why) in [
        ("8x-h100-nvlink[label=]", "an empty label="),
        (
            "8x-h100-nvlink[label=a;label=b]",
            "two labels (label=a, label=b)",
        ),
        (
            "8x-h100-nvlink[label=x],8x-h200-nvlink[label=x]",
            "two systems are labelled \"x\"",
        ),
        ("8x-h100-nvlink,8x-h100-nvlink", "two systems are labelled"),
    ] {
        exits_with(2, &["compare", "--systems", systems], &[why]);
    }
    rooftop()
        .args([
            "compare",
            "--model",
            "llama-3.1-8b",
            "--systems",
            "8x-h100-nvlink,8x-h100-nvlink[label=nvlink4]",
        ])
        .assert()
        .success();
}

/// Labels say what they change and usage errors exit 2: sensitivity's "GEMM efficiency"
/// knob scales attention's too, and `compare --plot` without an objective exited 1 listing
/// three of the four objectives it takes.
#[test]
fn knob_names_and_plot_usage_say_what_they_do() {
    let v = json_of(&["sensitivity"]);
    let names: Vec<&str> = v["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"GEMM and attention efficiency"),
        "{names:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("c.svg");
    exits_with(
        2,
        &[
            "compare",
            "--systems",
            "8x-h100-nvlink",
            "--plot",
            chart.to_str().unwrap(),
        ],
        &["cost|energy|latency|throughput"],
    );
}

/// The team box's calibration fixture (fitted on its GPU and link).
fn team_calibration() -> String {
    format!(
        "{}/tests/fixtures/calibration/kimi-k2.5-int4-8x-rtx-pro-6000-pcie.toml",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// "Would NVLink help" is one override and never slows the box; a link paired with a
/// topology no machine has is refused (NVLink on the team's root complex priced slower
/// than PCIe, and an NVSwitch topology on PCIe gave NVLink-class numbers).
#[test]
fn nvlink_on_a_pcie_box_is_one_override_and_mismatched_topologies_are_refused() {
    let with = |sets: &[&str]| -> Vec<String> {
        let mut args = vec!["predict".to_string()];
        for s in sets {
            args.extend(["--set".to_string(), s.to_string()]);
        }
        args
    };
    let tpot = |sets: &[&str]| -> f64 {
        let args = with(sets);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        json_of(&args)["tpot_ms"].as_f64().unwrap()
    };
    let pcie = tpot(&[]);
    let nvlink = tpot(&["system.interconnect=nvlink5"]);
    assert!(nvlink < pcie, "NVLink5 {nvlink} ms vs PCIe {pcie} ms");
    assert_eq!(
        tpot(&["system.interconnect=nvlink5", "system.topology=nvswitch"]),
        nvlink
    );
    for sets in [
        &["system.topology=nvswitch"][..],
        &[
            "system.interconnect=nvlink5",
            "system.topology=root-complex",
        ],
    ] {
        let args = with(sets);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&args, &["field `topology`"]);
    }
}

/// A DSA model without its indexer's shape is refused: it was priced with 64 invented
/// heads and no indexer cache.
#[test]
fn a_dsa_model_without_its_indexer_heads_is_refused() {
    fails_with(
        &[
            "predict",
            "--model",
            &fixture("model-dsa-without-indexer-heads.toml"),
            "--system",
            "8x-b200-nvlink",
        ],
        &[
            "model-dsa-without-indexer-heads.toml",
            "index_n_heads",
            "wherever index_topk is set",
        ],
    );
}

/// Output that cannot be written is an error, not a silent success (stdout) or a panic
/// (stderr: `eprintln!` exited 101).
#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_or_stderr_exits_1() {
    use std::process::{Command as Std, Stdio};
    let bin = assert_cmd::cargo::cargo_bin("rooftop");
    let full = || Stdio::from(std::fs::File::create("/dev/full").unwrap());
    let out = Std::new(&bin)
        .args(["list", "models"])
        .stdout(full())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("writing the output failed"));
    // An error message that cannot be written: still exit 1.
    let out = Std::new(&bin)
        .args(["predict", "--model", "gpt-5"])
        .stdout(Stdio::null())
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // A note on stderr that cannot be written fails a run that otherwise succeeded.
    let cal = team_calibration();
    let out = Std::new(&bin)
        .args([
            "predict",
            "--system",
            "8x-h200-nvlink",
            "--calibration",
            &cal,
        ])
        .args(["--transfer-calibration"])
        .stdout(Stdio::null())
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// A bad flag value is usage (exit 2) with nothing on stdout and a message naming the flag,
/// the value and what was expected.
fn usage_with(args: &[&str], needles: &[&str]) {
    exits_with(2, args, needles)
}

/// Counts take digits or an exponent that comes out whole (`1e8`, as the README writes the
/// `--max-points` default); a fraction of a token is refused, never rounded, by every count
/// flag alike.
#[test]
fn counts_take_whole_exponents_and_refuse_fractions() {
    usage_with(
        &["predict", "--context", "1.5"],
        &[
            "--context",
            "\"1.5\" is not a whole number",
            "whole number of tokens",
        ],
    );
    for args in [
        vec!["sweep", "--input-len", "2.5"],
        vec!["op", "moe", "--tokens", "0.5"],
        vec!["specdec", "--context=-1"],
        vec!["explore", "--max-points", "1.5"],
        vec!["predict", "--batch", "nan"],
        vec!["explore", "--context", "1.5..8"],
    ] {
        let flag = args.iter().find(|a| a.starts_with("--")).unwrap();
        let flag = flag.split('=').next().unwrap();
        usage_with(&args, &[flag, "whole number"]);
    }
    let v = json_of(&["predict", "--context", "1e3", "--batch", "6.4e1"]);
    assert_eq!(
        (v["context"].as_u64(), v["batch"].as_u64()),
        (Some(1000), Some(64))
    );
    assert_eq!(
        json_of(&["predict", "--context", "1000", "--batch", "64"])["tpot_ms"],
        v["tpot_ms"]
    );
    rooftop()
        .args([
            "explore",
            "--max-points",
            "1e8",
            "--batch",
            "1",
            "--format",
            "csv",
        ])
        .assert()
        .success();
    rooftop()
        .args([
            "explore",
            "--max-points",
            "1e0",
            "--batch",
            "1,2",
            "--format",
            "csv",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--max-points 1"));
}

/// A GPU rule holds for a `--set` exactly as for a file: each edit is refused both ways,
/// naming the field (a host link that is no interconnect and a clock of 0 MHz passed as
/// overrides), and a plausible one is accepted both ways.
#[test]
fn a_gpu_set_is_checked_by_the_rules_a_file_is() {
    let dir = tempfile::tempdir().unwrap();
    let base = include_str!("../configs/gpus/rtx-pro-6000.toml");
    for (key, value, ok) in [
        ("host_link", "\"nonexist\"", false),
        ("boost_clock", "\"0 MHz\"", false),
        ("boost_clock", "\"20 GHz\"", false),
        ("l2_cache", "\"0 MB\"", false),
        ("sm_count", "0", false),
        ("sm_count", "100000", false),
        ("memory_bandwidth", "\"3350000 TB/s\"", false),
        ("memory_bandwidth", "\"20 TB/s\"", true),
        ("boost_clock", "\"2000 MHz\"", true),
        ("host_link", "\"pcie-gen4-x16\"", true),
    ] {
        let line = base
            .lines()
            .find(|l| l.starts_with(&format!("{key} =")))
            .unwrap_or_else(|| panic!("rtx-pro-6000 has {key}"));
        let file = dir.path().join(format!("{key}-{ok}.toml"));
        std::fs::write(&file, base.replace(line, &format!("{key} = {value}"))).unwrap();
        let set = format!("gpu.{key}={value}");
        let swapped = format!("system.gpu={}", file.display());
        for args in [["predict", "--set", &set], ["predict", "--set", &swapped]] {
            if ok {
                rooftop().args(args).assert().success();
            } else {
                fails_with(&args, &[&format!("field `{key}`"), "expected"]);
            }
        }
        if !ok {
            fails_with(&["predict", "--set", &set], &[&set]);
        }
    }
}

/// A link, a NIC or a KV link ten thousand times faster than any made is a typo in a unit,
/// refused naming the field; a fast but possible one runs.
#[test]
fn a_bandwidth_no_link_has_is_refused() {
    for (args, field) in [
        (
            vec!["predict", "--set", "interconnect.bandwidth=\"5000 TB/s\""],
            "bandwidth_per_direction",
        ),
        (
            vec![
                "predict",
                "--model",
                "deepseek-v3-fp8",
                "--system",
                "2x8-h200-ib",
                "--set",
                "system.nodes.nic_rate=\"10000 Tb/s\"",
            ],
            "nodes.nic_rate",
        ),
    ] {
        fails_with(&args, &[&format!("field `{field}`"), "1000 TB/s"]);
    }
    rooftop()
        .args(["predict", "--set", "interconnect.bandwidth=\"50 TB/s\""])
        .assert()
        .success();
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("link.toml");
    let text = include_str!("../configs/kv_links/cx7-8x400g.toml")
        .replace("nic_rate = \"400 Gb/s\"", "nic_rate = \"400000 TB/s\"");
    std::fs::write(&link, text).unwrap();
    fails_with(
        &[
            "sweep",
            "--model",
            "deepseek-v3-fp8",
            "--system",
            "8x-h200-nvlink",
            "--prefill",
            "workers=1,tp=8",
            "--decode",
            "workers=1,tp=8",
            "--kv-link",
            link.to_str().unwrap(),
        ],
        &["link.toml:", "field `nic_rate`", "1000 TB/s"],
    );
}

/// A kernel is priced on the single box that carries its GPU, not on a multi-node system
/// whose name sorts first (`2x8-h100-ib` before `8x-h100-nvlink`, `4x8-b200-ib` before
/// `8x-b200-nvlink`).
#[test]
fn a_gpu_stands_for_its_single_box() {
    for (gpu, system) in [("h100-sxm", "8x-h100-nvlink"), ("b200", "8x-b200-nvlink")] {
        let text = common::stdout_of(&[
            "op", "gemm", "--gpu", gpu, "--m", "16", "--n", "4096", "--k", "4096",
        ]);
        assert!(
            text.contains(&format!("efficiencies of {system})")),
            "{gpu}: {text}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("gemm_b200.csv");
    std::fs::write(&table, "m,n,k,dtype,latency_ms\n16,4096,4096,bf16,0.01\n").unwrap();
    let text = common::stdout_of(&["validate", "--measured", table.to_str().unwrap()]);
    assert!(text.contains("(gemm, 1 rows) on 8x-b200-nvlink"), "{text}");
}

/// A folder where a file is expected says so, for every kind of file.
#[test]
fn a_directory_for_a_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for args in [
        vec!["predict", "--model", d],
        vec!["predict", "--system", d],
        vec!["predict", "--engine", d],
        vec!["predict", "--calibration", d],
        vec!["import-hf", d],
    ] {
        fails_with(&args, &[d, "is a directory", "expected a file"]);
    }
    usage_with(
        &["specdec", "--acceptance", d],
        &["--acceptance", "is a directory"],
    );
}

/// A calibration file is read strictly: an unknown key is refused with its line, and a bad
/// value names the line of that parameter's `value`, not the first parameter's.
#[test]
fn calibration_errors_name_the_line_and_unknown_keys_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(team_calibration()).unwrap();
    let write = |name: &str, t: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, t).unwrap();
        p.display().to_string()
    };
    let run = |cal: &str| ["predict", "--calibration", cal].map(str::to_string);
    // The third parameter's value, on its own line.
    let third = text
        .match_indices("\nvalue = ")
        .nth(2)
        .map(|(i, _)| i + 1)
        .unwrap();
    let line = text[..third].matches('\n').count() + 1;
    let end = third + text[third..].find('\n').unwrap();
    let bad = format!("{}value = 7.5{}", &text[..third], &text[end..]);
    let f = write("bad-value.toml", &bad);
    let args = run(&f);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fails_with(&args, &[&format!("{f}:{line}:"), "expected a value in"]);
    for (name, t, key) in [
        (
            "top.toml",
            text.replacen("rms_error = ", "rms_eror = 1\nrms_error = ", 1),
            "rms_eror",
        ),
        (
            "param.toml",
            text.replacen("\nprior = ", "\npriro = 1\nprior = ", 1),
            "priro",
        ),
    ] {
        let f = write(name, &t);
        let args = run(&f);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&args, &[&f, "line ", &format!("unknown field `{key}`")]);
    }
}

/// `import-hf` refuses sizes no model has and quantization it cannot mean, naming the field
/// and what was expected, instead of importing them (hidden_size 1e15, 4294967295 wide;
/// blocks and groups of 0 weights; more leading dense layers than layers).
#[test]
fn import_hf_refuses_implausible_sizes_and_empty_groups() {
    let dir = tempfile::tempdir().unwrap();
    let data = format!("{}/tests/data/hf-configs", env!("CARGO_MANIFEST_DIR"));
    let read = |m: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{data}/{m}/config.json")).unwrap())
            .unwrap()
    };
    let llama = read("meta-llama--Meta-Llama-3.1-8B");
    let dsv3 = read("deepseek-ai--DeepSeek-V3");
    let edit = |base: &serde_json::Value, ptr: &str, v: serde_json::Value| {
        let mut c = base.clone();
        *c.pointer_mut(ptr).unwrap_or_else(|| panic!("{ptr}")) = v;
        c
    };
    let gptq = |g: serde_json::Value| {
        let mut c = llama.clone();
        c["quantization_config"] =
            serde_json::json!({"quant_method": "gptq", "bits": 4, "group_size": g});
        c
    };
    for (name, config, needles) in [
        (
            "wide",
            edit(&llama, "/hidden_size", serde_json::json!(1e15)),
            vec!["`hidden_size`", "from 1 to 1048576"],
        ),
        (
            "u32max",
            edit(&llama, "/hidden_size", serde_json::json!(4294967295u64)),
            vec!["`hidden_size`", "from 1 to 1048576"],
        ),
        (
            "block0",
            edit(
                &dsv3,
                "/quantization_config/weight_block_size",
                serde_json::json!([0, 0]),
            ),
            vec![
                "quantization_config.weight_block_size",
                "two positive block dimensions",
            ],
        ),
        (
            "group0",
            gptq(serde_json::json!(0)),
            vec!["quantization_config.group_size", "a positive group size"],
        ),
        (
            "firstk",
            edit(&dsv3, "/first_k_dense_replace", serde_json::json!(100)),
            vec![
                "first_k_dense_replace",
                "at most num_hidden_layers (61), got 100",
            ],
        ),
    ] {
        let p = dir.path().join(format!("{name}.json"));
        std::fs::write(&p, serde_json::to_string_pretty(&config).unwrap()).unwrap();
        let f = p.display().to_string();
        let mut n = needles.clone();
        n.push(&f);
        fails_with(&["import-hf", &f], &n);
    }
    // -1 (one scale per output channel) is a group size.
    let p = dir.path().join("channel.json");
    std::fs::write(&p, gptq(serde_json::json!(-1)).to_string()).unwrap();
    rooftop()
        .args(["import-hf", p.to_str().unwrap()])
        .assert()
        .success();
}

/// NaN and infinity are no value in a description, as a float literal or in a unit string,
/// in a file or a `--set`: refused with the line, the field and what was expected.
#[test]
fn nan_and_infinity_in_a_description_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sys = include_str!("../configs/systems/8x-rtx-pro-6000-pcie.toml");
    let gpu = include_str!("../configs/gpus/rtx-pro-6000.toml");
    let bw = gpu
        .lines()
        .find(|l| l.starts_with("memory_bandwidth ="))
        .unwrap();
    for (i, literal) in ["nan", "inf", "-nan"].iter().enumerate() {
        let p = dir.path().join(format!("sys{i}.toml"));
        std::fs::write(
            &p,
            sys.replacen("memory = 0.", &format!("memory = {literal} # 0."), 1),
        )
        .unwrap();
        let f = p.display().to_string();
        fails_with(
            &["predict", "--system", &f],
            &[&f, "line ", "expected a fraction"],
        );
        fails_with(
            &["predict", "--set", &format!("efficiency.memory={literal}")],
            &["--set efficiency.memory", "expected a fraction"],
        );
    }
    for (i, v) in ["nan GB/s", "NaN GB/s", "inf GB/s", "1e400 GB/s"]
        .iter()
        .enumerate()
    {
        let p = dir.path().join(format!("gpu{i}.toml"));
        std::fs::write(&p, gpu.replace(bw, &format!("memory_bandwidth = \"{v}\""))).unwrap();
        let f = p.display().to_string();
        let needles = [f.as_str(), "line ", "is not finite", "expected a bandwidth"];
        fails_with(&["predict", "--set", &format!("system.gpu={f}")], &needles);
        fails_with(
            &["predict", "--set", &format!("gpu.memory_bandwidth={v}")],
            &["--set gpu.memory_bandwidth", "is not finite"],
        );
    }
}

/// A tensor-parallel split must leave every rank an equal shard of each weight, whatever
/// its format: an uneven split is a layout the engine refuses, not one to price with
/// fractional shapes (before, only block-scaled formats were checked).
#[test]
fn a_weight_width_that_does_not_split_over_the_ranks_is_refused() {
    for (model, field, what) in [
        (
            "llama-3.1-8b",
            "intermediate_size=14340",
            "dense MLP width 14340",
        ),
        (
            "qwen3-30b-a3b",
            "moe_intermediate_size=770",
            "expert width 770",
        ),
    ] {
        let set = format!("model.config.{field}");
        let at = |tp: &'static str| {
            let args = ["predict", "--model", model, "--system", "8x-h100-nvlink"];
            let mut a: Vec<&str> = args.to_vec();
            a.extend(["--set", set.as_str(), "--tp", tp, "--format", "json"]);
            a.into_iter().map(String::from).collect::<Vec<String>>()
        };
        let eight = at("8");
        let e = common::failure_of(&eight.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        assert!(
            e.contains("cannot run") && e.contains(what) && e.contains("split evenly over 8"),
            "{model}: {e}"
        );
        // A layout whose ranks divide it still runs.
        let two = at("2");
        let v = common::json_of(&two.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        assert!(v["tpot_ms"].as_f64().unwrap() > 0.0, "{model}: {v}");
    }
}

/// A system file that pairs its link with a topology no machine has is named with its
/// line; only a pairing the overrides made says "after --set".
#[test]
fn a_topology_the_link_cannot_run_in_names_the_file_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = common::stdout_of(&["show", "8x-h100-nvlink"]);
    assert!(text.contains("topology = \"nvswitch\""), "{text}");
    let p = dir.path().join("bad.toml");
    std::fs::write(
        &p,
        text.replacen("topology = \"nvswitch\"", "topology = \"root-complex\"", 1),
    )
    .unwrap();
    let f = p.display().to_string();
    let e = common::failure_of(&["predict", "--system", &f]);
    let line = text
        .lines()
        .position(|l| l.starts_with("topology"))
        .unwrap()
        + 1;
    assert!(e.contains(&format!("{f}:{line}: field `topology`")), "{e}");
    assert!(!e.contains("after --set"), "{e}");
    let e = common::failure_of(&[
        "predict",
        "--system",
        "8x-h100-nvlink",
        "--set",
        "system.topology=root-complex",
    ]);
    assert!(e.contains("(after --set)"), "{e}");
}

/// `op attention --layer` prices the layer asked for: on gpt-oss, whose even layers attend
/// over a 128-token window and odd ones over the whole context, a long context costs the
/// global layer more; a layer past the last is refused with the model's count.
#[test]
fn op_attention_prices_the_layer_asked_for() {
    let time = |layer: &str| {
        let v = common::json_of(&[
            "op",
            "attention",
            "--model",
            "gpt-oss-120b",
            "--system",
            "8x-h100-nvlink",
            "--batch",
            "32",
            "--context",
            "32768",
            "--layer",
            layer,
            "--format",
            "json",
        ]);
        (
            v["time_us"].as_f64().unwrap(),
            v["context"].as_str().unwrap().to_string(),
        )
    };
    let (sliding, s_ctx) = time("0");
    let (global, g_ctx) = time("1");
    assert!(s_ctx.contains("sliding window") && g_ctx.contains("full attention"));
    assert!(
        global > 2.0 * sliding,
        "global {global} us vs sliding {sliding} us"
    );
    let e = common::failure_of(&[
        "op",
        "attention",
        "--model",
        "gpt-oss-120b",
        "--layer",
        "36",
    ]);
    assert!(e.contains("36 decoder layers"), "{e}");
}

/// A step with no all-reduce moves no bytes in one: tp1 reports 0 of each.
#[test]
fn one_gpu_reports_no_allreduce_bytes() {
    let at_tp = |tp: &str| {
        common::json_of(&[
            "predict",
            "--model",
            "llama-3.1-8b",
            "--system",
            "8x-h100-nvlink",
            "--tp",
            tp,
            "--batch",
            "8",
            "--format",
            "json",
        ])
    };
    let (one, two) = (at_tp("1"), at_tp("2"));
    assert_eq!(one["allreduces_per_step"], 0);
    assert_eq!(one["allreduce_bytes"].as_f64(), Some(0.0));
    assert!(two["allreduces_per_step"].as_u64().unwrap() > 0);
    assert_eq!(two["allreduce_bytes"].as_f64(), Some(8.0 * 4096.0 * 2.0));
}

/// A kernel table measures one GPU: validating it with a calibration fitted on another GPU
/// is refused naming both (the team box's RTX PRO 6000 efficiencies priced an H100 GEMM
/// table without a word), and one fitted on that table's GPU is applied.
#[test]
fn a_kernel_table_takes_only_a_calibration_of_its_own_gpu() {
    let table = common::data("dev/gemm_h100-sxm.csv");
    let table = table.to_str().unwrap();
    exits_with(
        1,
        &[
            "validate",
            "--measured",
            table,
            "--calibration",
            &team_calibration(),
        ],
        &["h100-sxm", "rtx-pro-6000", "gpu"],
    );
    let dir = tempfile::tempdir().unwrap();
    let own = dir.path().join("h100.toml");
    let own = own.to_str().unwrap();
    rooftop()
        .args(["calibrate", "--measured", table, "--out", own])
        .assert()
        .success();
    rooftop()
        .args(["validate", "--measured", table, "--calibration", own])
        .assert()
        .success();
}

/// A calibration that does not say what it was fitted on would pass for any run: a blank
/// model, system or layout is refused naming the field (blanked, the team box's fit priced
/// Llama-3.1-70B on H100 with the RTX PRO 6000's efficiencies).
#[test]
fn a_calibration_with_a_blank_identity_is_refused() {
    let text = std::fs::read_to_string(team_calibration()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for field in ["model", "system", "parallel"] {
        let blanked: String = text
            .lines()
            .map(|l| {
                if l.starts_with(&format!("{field} = ")) {
                    format!("{field} = \"\"")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert_ne!(blanked, text.trim_end(), "{field} line present");
        let f = dir.path().join(format!("{field}.toml"));
        std::fs::write(&f, blanked).unwrap();
        exits_with(
            1,
            &[
                "predict",
                "--calibration",
                f.to_str().unwrap(),
                "--model",
                "llama-3.1-70b",
                "--system",
                "8x-h100-nvlink",
                "--tp",
                "4",
            ],
            &[&format!("field `{field}`")],
        );
    }
}

/// `compare` with `--prefill/--decode` runs each system's sweep of the pools: the flags the
/// aggregated comparison reads and this one does not (targets, the buyer's objective and
/// chart, the TPOT columns' context) are refused as usage errors, never dropped, and so is
/// `--parallel` (it was exit 1 beside `sweep --tp`'s 2).
#[test]
fn a_disaggregated_compare_refuses_the_flags_it_cannot_honour() {
    let base = [
        "compare",
        "--model",
        "llama-3.1-8b",
        "--systems",
        "8x-h100-nvlink",
        "--prefill",
        "workers=1,tp=1",
        "--decode",
        "workers=1,tp=1",
    ];
    for extra in [
        &["--tpot-target", "50ms"][..],
        &["--ttft-target", "1s"],
        &["--objective", "cost"],
        &["--context", "4096"],
        &["--parallel", "tp2"],
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        exits_with(2, &args, &[extra[0], "does not apply"]);
    }
    rooftop().args(base).assert().success();
}

/// A throughput is a time per token for each of its requests: one that implies more than
/// ten minutes per token is refused as a TPOT of that length is (0.001 tok/s at C = 1 was
/// fitted, driving three parameters to their bounds, and reported at +6,913,214 %).
#[test]
fn a_throughput_slower_than_any_serving_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("slow.toml");
    std::fs::write(
        &f,
        "system = \"8x-rtx-pro-6000-pcie\"\nmodel = \"kimi-k2.5-int4\"\nsource = \"a typo\"\n\
         tpot_definition = \"e2e\"\n[[points]]\nconcurrency = 1\noutput_len = 32\n\
         throughput = \"0.001 tok/s\"\n",
    )
    .unwrap();
    let f = f.to_str().unwrap();
    for cmd in ["validate", "calibrate"] {
        exits_with(
            1,
            &[cmd, "--measured", f],
            &["slow.toml:", "s per token", "600 s"],
        );
    }
}

/// `op gemm --gpu G --system S` prices G's kernels with S's efficiencies: the engine's
/// per-architecture GEMM rules resolve for G (an H100 in a B200 system failed on the B200
/// engine's FP8 family rule, for a BF16 GEMM).
#[test]
fn op_gemm_on_another_systems_gpu_resolves_that_gpus_kernels() {
    let time = |extra: &[&str]| -> f64 {
        let mut args = vec![
            "op", "gemm", "--gpu", "h100-sxm", "--m", "16", "--n", "7168", "--k", "2048",
        ];
        args.extend_from_slice(extra);
        json_of(&args)["time_us"].as_f64().unwrap()
    };
    let own = time(&[]);
    let borrowed = time(&["--system", "8x-b200-nvlink"]);
    assert!(own > 0.0 && borrowed > 0.0);
}
