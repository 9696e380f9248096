//! Issue 15: what rooftop must refuse, bound, or say exactly. Each test runs the binary as a
//! user would and names the behaviour it keeps.

use assert_cmd::Command;
use rooftop::spec::registry::{builtin_text, Kind};
use std::path::Path;

fn rooftop() -> Command {
    Command::cargo_bin("rooftop").unwrap()
}

/// Run; return (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let o = rooftop().args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Must fail with `code`; returns stderr.
fn refused(args: &[&str], code: i32) -> String {
    let (c, out, err) = run(args);
    assert_eq!(c, code, "{args:?}: exit {c}\nstdout: {out}\nstderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn fixture() -> String {
    format!(
        "{}/tests/fixtures/calibration/kimi-k2.5-int4-8x-rtx-pro-6000-pcie.toml",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A built-in model's TOML with `from` replaced by `to`, written into `dir`.
fn edited_model(dir: &Path, name: &str, from: &str, to: &str) -> String {
    let t = builtin_text(Kind::Model, name).unwrap();
    assert!(t.contains(from), "{name} has no {from}");
    let p = dir.join(format!("{name}-edited.toml"));
    std::fs::write(&p, t.replacen(from, to, 1)).unwrap();
    p.display().to_string()
}

// ---- exit codes and flag values ----------------------------------------------------------

#[test]
fn zero_counts_in_flags_are_bad_usage_exit_2_everywhere() {
    for args in [
        &["predict", "--batch", "0"][..],
        &["predict", "--tp", "0"],
        &["sweep", "--concurrency", "0"],
        &["sweep", "--concurrency", "1,0"],
        &["specdec", "--k", "0"],
        &["plot", "roofline", "--batch", "0", "--out", "x.png"],
        &["plot", "breakdown", "--batch", "0", "--out", "x.png"],
        &["predict", "--batch", "4294967296"],
    ] {
        let e = refused(args, 2);
        assert!(
            e.contains("expected") || e.contains("must be"),
            "{args:?}: {e}"
        );
    }
}

#[test]
fn draft_length_ranges_say_the_bound_whatever_their_size() {
    for k in ["1..100", "1..1000000", "1..100000000000"] {
        let e = refused(&["specdec", "--k", k], 2);
        assert!(e.contains("must be 1..64"), "{k}: {e}");
    }
}

#[test]
fn layout_typos_name_the_layout_not_a_fragment_of_it() {
    let e = refused(
        &[
            "compare",
            "--systems",
            "8x-h200-nvlink",
            "--parallel",
            "foo",
        ],
        2,
    );
    assert!(
        e.contains("\"foo\" does not start with tp, ep, pp, dp or re"),
        "{e}"
    );
    assert!(!e.contains("fo needs"), "{e}");
    let e = refused(
        &[
            "compare",
            "--systems",
            "8x-h200-nvlink",
            "--parallel",
            "tp2tp4",
        ],
        2,
    );
    assert!(e.contains("given twice"), "{e}");
}

#[test]
fn a_time_with_an_exponent_reads_as_a_number_then_a_unit() {
    let (c, _, err) = run(&["sensitivity", "--target-tpot", "1e-3ms"]);
    assert_eq!(c, 0, "{err}");
    let e = refused(&["sensitivity", "--target-tpot", "8"], 2);
    assert!(e.contains("no unit"), "{e}");
}

// ---- bounded work -------------------------------------------------------------------------

#[test]
fn ranges_are_counted_before_they_are_expanded() {
    let e = refused(&["explore", "--batch", "1..4294967295"], 2);
    assert!(e.contains("more than 1000000 values"), "{e}");
    // Values past 32 bits are refused, not wrapped.
    let e = refused(&["explore", "--context", "4294967296"], 2);
    assert!(e.contains("reaches outside"), "{e}");
}

#[test]
fn a_grid_past_max_points_is_refused_with_its_estimated_time() {
    let e = refused(
        &["explore", "--batch", "1..200000", "--context", "1..200000"],
        1,
    );
    assert!(
        e.contains("40000000000 design points")
            && e.contains("points/s")
            && e.contains("--max-points"),
        "{e}"
    );
    let e = refused(
        &[
            "explore",
            "--batch",
            "1..64",
            "--context",
            "1..64",
            "--max-points",
            "100",
        ],
        1,
    );
    assert!(e.contains("4096 design points"), "{e}");
}

#[test]
fn a_grid_where_nothing_can_run_is_an_error_not_zero_points() {
    let e = refused(&["explore", "--parallel", "tp3", "--format", "text"], 1);
    assert!(e.contains("no design point") && e.contains("tp 3"), "{e}");
    let e = refused(
        &[
            "compare",
            "--systems",
            "8x-h200-nvlink",
            "--parallel",
            "tp3",
        ],
        1,
    );
    assert!(e.contains("no system and layout can run"), "{e}");
}

#[test]
fn endless_files_are_refused_after_a_bounded_read() {
    if !Path::new("/dev/zero").exists() {
        return;
    }
    for args in [
        &["calibrate", "--measured", "/dev/zero"][..],
        &["predict", "--calibration", "/dev/zero"],
        &["predict", "--model", "/dev/zero"],
    ] {
        let e = refused(args, 1);
        assert!(
            e.contains("/dev/zero") && e.contains("MiB"),
            "{args:?}: {e}"
        );
    }
}

// ---- errors a user can act on -------------------------------------------------------------

#[test]
fn os_errors_are_printed_once_and_say_not_found() {
    let e = refused(&["predict", "--model", "/no/such/model.toml"], 1);
    assert_eq!(e.matches("os error 2").count(), 1, "{e}");
    assert!(e.contains("not found"), "{e}");
    let e = refused(&["calibrate", "--measured", "/no/such/run.json"], 1);
    assert_eq!(e.matches("os error 2").count(), 1, "{e}");
}

#[test]
fn a_missing_acceptance_file_says_not_found() {
    let e = refused(&["specdec", "--acceptance", "/no/such/accepted.txt"], 2);
    assert!(e.contains("not found"), "{e}");
}

#[test]
fn a_model_read_from_a_pipe_loads_like_a_file() {
    let text = builtin_text(Kind::Model, "llama-3.1-8b").unwrap();
    rooftop()
        .args([
            "predict",
            "--model",
            "/dev/stdin",
            "--system",
            "8x-h100-nvlink",
            "--tp",
            "1",
        ])
        .write_stdin(text)
        .assert()
        .success();
}

#[test]
fn relative_paths_in_a_system_file_are_read_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("box");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(
        sub.join("my-gpu.toml"),
        builtin_text(Kind::Gpu, "h200").unwrap(),
    )
    .unwrap();
    let sys = builtin_text(Kind::System, "8x-h200-nvlink")
        .unwrap()
        .replacen("gpu = \"h200\"", "gpu = \"./my-gpu.toml\"", 1);
    std::fs::write(sub.join("system.toml"), sys).unwrap();
    // Run from elsewhere: the GPU file must be found beside the system file.
    let o = rooftop()
        .current_dir(dir.path())
        .args([
            "predict",
            "--model",
            "llama-3.1-8b",
            "--system",
            "box/system.toml",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn text_output_uses_words_not_debug_names_or_raw_digits() {
    let (_, out, _) = run(&["sweep", "--concurrency", "1", "--tpot-def", "e2e"]);
    assert!(out.contains("TPOT as e2e") && !out.contains("E2e"), "{out}");
    let (_, out, _) = run(&[
        "predict",
        "--model",
        "llama-3.1-8b",
        "--system",
        "8x-h100-nvlink",
        "--tp",
        "1",
    ]);
    assert!(out.contains("(tp1, 1 GPU)"), "{out}");
    assert!(
        !out.contains("0      of"),
        "all-reduces of a size when there are none: {out}"
    );
    let (_, out, _) = run(&["list", "gpus"]);
    assert!(
        out.contains("102.6 GB") && !out.contains("102.641958912"),
        "{out}"
    );
    let (_, out, _) = run(&["list", "measured"]);
    assert!(
        out.contains("kimi-k2.5-int4 on 8x-rtx-pro-6000-pcie"),
        "empty description: {out}"
    );
}

// ---- silent wrong numbers ------------------------------------------------------------------

#[test]
fn a_calibration_applied_to_another_system_is_refused_unless_transferred() {
    let cal = fixture();
    let e = refused(
        &[
            "predict",
            "--calibration",
            &cal,
            "--system",
            "8x-h200-nvlink",
        ],
        1,
    );
    assert!(
        e.contains("8x-rtx-pro-6000-pcie (this run: 8x-h200-nvlink)")
            && e.contains("--transfer-calibration"),
        "{e}"
    );
    for cmd in ["sweep", "specdec"] {
        refused(
            &[cmd, "--calibration", &cal, "--system", "8x-h200-nvlink"],
            1,
        );
    }
    refused(
        &["predict", "--calibration", &cal, "--tp", "4", "--pp", "2"],
        1,
    );
    let (c, out, err) = run(&[
        "predict",
        "--calibration",
        &cal,
        "--system",
        "8x-h200-nvlink",
        "--transfer-calibration",
    ]);
    assert_eq!(c, 0, "{err}");
    assert!(out.contains("calibrated"), "{out}");
    assert!(
        err.contains("carries over kernel_gap_us") && err.contains("memory_efficiency"),
        "the note must say what carried over and what did not: {err}"
    );
    // On the system it was fitted on, it applies as before.
    assert_eq!(run(&["predict", "--calibration", &cal]).0, 0);
}

#[test]
fn a_measurement_is_fitted_only_to_its_own_model_and_system() {
    let e = refused(
        &[
            "calibrate",
            "--measured",
            "k25b6000bench1",
            "--model",
            "llama-3.1-8b",
        ],
        1,
    );
    assert!(e.contains("measured on model \"kimi-k2.5-int4\""), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.toml");
    let t = builtin_text(Kind::Measured, "k25b6000bench1")
        .unwrap()
        .replacen("system = \"8x-rtx-pro-6000-pcie\"", "system = \"nope\"", 1);
    std::fs::write(&p, t).unwrap();
    let e = refused(&["calibrate", "--measured", p.to_str().unwrap()], 1);
    assert!(e.contains("names system \"nope\""), "{e}");
}

#[test]
fn zero_sized_and_impossible_descriptions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, from, to, field) in [
        ("llama-3.1-8b", "head_dim = 128", "head_dim = 0", "head_dim"),
        (
            "gpt-oss-120b",
            "sliding_window = 128",
            "sliding_window = 0",
            "sliding_window",
        ),
        ("gpt-oss-120b", "sliding_window = 128", "", "sliding_window"),
        (
            "kimi-k2.5-int4",
            "num_layers = 1",
            "num_layers = 0",
            "eagle_head.num_layers",
        ),
    ] {
        let m = edited_model(d, name, from, to);
        let e = refused(&["predict", "--model", &m, "--system", "8x-h200-nvlink"], 1);
        assert!(e.contains(field), "{name} {to}: {e}");
    }
    let e = refused(
        &[
            "predict",
            "--set",
            "system.engine.activation_reserve=500 GB",
        ],
        1,
    );
    assert!(e.contains("engine.activation_reserve"), "{e}");
    let gpu = d.join("gpu.toml");
    std::fs::write(
        &gpu,
        builtin_text(Kind::Gpu, "h200").unwrap().replacen(
            "host_link = \"nvlink4\"",
            "host_link = \"nope\"",
            1,
        ),
    )
    .unwrap();
    let e = refused(
        &[
            "op",
            "gemm",
            "--gpu",
            gpu.to_str().unwrap(),
            "--m",
            "1",
            "--n",
            "1",
            "--k",
            "1",
        ],
        1,
    );
    assert!(e.contains("host_link") && e.contains("nope"), "{e}");
}

#[test]
fn an_all_reduce_of_nothing_is_refused_not_timed_at_minus_zero() {
    let e = refused(
        &[
            "op",
            "allreduce",
            "--system",
            "8x-h200-nvlink",
            "--bytes",
            "0",
        ],
        1,
    );
    assert!(e.contains("at least 1 byte"), "{e}");
}

#[test]
fn measurements_beyond_the_speed_of_light_or_absurdly_slow_are_refused_with_row_and_bound() {
    let dir = tempfile::tempdir().unwrap();
    let t = builtin_text(Kind::Measured, "k25b6000bench1").unwrap();
    for (to, says) in [
        ("tpot = \"1e308 ms\"", "longer than 600 s"),
        ("tpot = \"1 ms\"", "speed-of-light bound"),
    ] {
        let p = dir.path().join("m.toml");
        std::fs::write(&p, t.replacen("tpot = \"12.71875 ms\"", to, 1)).unwrap();
        for cmd in ["validate", "calibrate"] {
            let e = refused(&[cmd, "--measured", p.to_str().unwrap()], 1);
            assert!(e.contains("m.toml:") && e.contains(says), "{to}: {e}");
            assert!(!e.contains("000000000000"), "{e}");
        }
    }
}

#[test]
fn a_serving_benchmark_names_its_model_by_hf_id_and_must_match() {
    let f = format!(
        "{}/tests/fixtures/measured/vllm_c8.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let e = refused(
        &["calibrate", "--measured", &f, "--model", "llama-3.1-8b"],
        1,
    );
    assert!(e.contains("moonshotai/Kimi-K2.5"), "{e}");
    assert_eq!(run(&["calibrate", "--measured", &f]).0, 0);
}

#[test]
fn share_intervals_stay_within_zero_and_one() {
    let (c, out, err) = run(&["validate", "--format", "json"]);
    assert_eq!(c, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut shares = 0;
    for r in v["rows"].as_array().unwrap() {
        if r["unit"] == "fraction" {
            shares += 1;
            let ci = r["calibrated_ci95"].as_array().unwrap();
            let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
            assert!(
                (0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi),
                "{r}"
            );
        }
    }
    assert!(shares > 0, "no share rows: {out}");
}

#[test]
fn validate_and_calibrate_json_label_values_with_the_unit_they_are_in() {
    for cmd in ["validate", "calibrate"] {
        let (_, out, _) = run(&[cmd, "--format", "json"]);
        assert!(
            !out.contains("\"unit\": \"ms\"") && !out.contains("\"unit\": \"%\""),
            "{out}"
        );
        assert!(out.contains("\"unit\": \"s\""), "{cmd}: {out}");
    }
}

#[test]
fn a_vllm_result_saved_as_a_json_array_is_read_as_vllm_results() {
    let f = format!(
        "{}/tests/fixtures/measured/vllm_c8.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let one = std::fs::read_to_string(f).unwrap();
    let set = rooftop::measured::parse_text(
        &format!("[{one}, {one}]"),
        "a.json",
        rooftop::measured::FileFormat::sniff(&format!("[{one}]")).unwrap(),
        &Default::default(),
    )
    .unwrap();
    assert!(!set.observations.is_empty());
    assert_eq!(
        rooftop::measured::FileFormat::sniff(&format!("[{one}]")),
        Some(rooftop::measured::FileFormat::VllmJson)
    );
}

#[test]
fn impossible_trial_times_name_their_line_and_value_even_on_the_last_line() {
    for bad in ["0s", "-0.4s", "1e400s"] {
        let text = format!(
            "Testing max_tokens=32...\n  Trial 1: 0.407s, 32 tokens\n  Trial 2: {bad}, 32 tokens\n"
        );
        let e = rooftop::measured::parse_text(
            &text,
            "run.log",
            rooftop::measured::FileFormat::MacroLog,
            &Default::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("run.log:3") && e.contains(bad), "{bad}: {e}");
    }
}

#[test]
fn a_plot_that_cannot_be_written_says_so_without_a_debug_dump() {
    let dir = tempfile::tempdir().unwrap();
    let e = refused(
        &[
            "plot",
            "roofline",
            "--out",
            &format!("{}/", dir.path().join("x.png").display()),
        ],
        1,
    );
    let e2 = {
        std::fs::create_dir(dir.path().join("d.png")).unwrap();
        refused(
            &[
                "plot",
                "roofline",
                "--out",
                dir.path().join("d.png").to_str().unwrap(),
            ],
            1,
        )
    };
    for e in [e, e2] {
        assert!(!e.contains("ImageError") && !e.contains("Os {"), "{e}");
    }
}

#[test]
fn a_bare_run_outside_the_checkout_writes_no_charts_there() {
    let dir = tempfile::tempdir().unwrap();
    let o = rooftop().current_dir(dir.path()).output().unwrap();
    assert!(o.status.success());
    assert!(!dir.path().join("plots").exists());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--plots DIR"));
    let target = dir.path().join("charts");
    let o = rooftop()
        .current_dir(dir.path())
        .args(["--plots", target.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout)
        .contains(&format!("charts written to {}", target.display())));
    assert!(std::fs::read_dir(&target).unwrap().count() > 0);
}

#[test]
fn a_draft_model_must_share_the_vocabulary_and_fit_in_memory() {
    let e = refused(&["specdec", "--draft", "model:llama-3.1-8b"], 1);
    assert!(e.contains("vocabulary"), "{e}");
    let e = refused(
        &[
            "specdec",
            "--model",
            "llama-3.1-8b",
            "--system",
            "8x-l40s-pcie",
            "--tp",
            "1",
            "--draft",
            "model:llama-3.1-70b",
        ],
        1,
    );
    assert!(e.contains("does not fit"), "{e}");
}

#[test]
fn an_error_that_rounds_to_zero_prints_without_a_minus_sign() {
    for cmd in ["validate", "calibrate"] {
        let (c, out, err) = run(&[cmd]);
        assert_eq!(c, 0, "{err}");
        assert!(
            !out.contains("-0.0 pt") && !out.contains("-0.0 %"),
            "{cmd}:\n{out}"
        );
    }
}
