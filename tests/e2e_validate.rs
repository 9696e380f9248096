//! `rooftop validate` on an e2e serving CSV: runs with a description are predicted and
//! summarised; runs without one, or with a layout rooftop cannot express, are counted as
//! skipped with the reason, never guessed.

use assert_cmd::Command;

mod common;

#[test]
fn e2e_csv_is_validated_run_by_run_and_skips_name_their_reason() {
    let out = validate_sample(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total_runs"], 4);
    assert_eq!(v["overall_tpot"]["n"], 2);
    let runs = v["runs"].as_array().unwrap();
    for r in runs {
        assert_eq!(r["model"], "llama-3.1-8b");
        assert!(r["predicted_tpot_ms"].as_f64().unwrap() > 0.0);
        assert!(r["predicted_ttft_ms"].as_f64().unwrap() > 0.0);
        // How the run was made travels with it (empty where the file records none).
        assert!(r["campaign"].is_string() && r["image"].is_string(), "{r}");
    }
    let reasons: Vec<String> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reason"].as_str().unwrap().to_string())
        .collect();
    assert!(reasons
        .iter()
        .any(|r| r.contains("no description of nvidia/Qwen3-32B-NVFP4")));
    // 128 GPUs: more than the largest B200 system (8 nodes of 8).
    assert!(reasons.iter().any(|r| r.contains("needs 128 GPUs")));
}

fn validate_sample(extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("rooftop")
        .unwrap()
        .args([
            "validate",
            "--measured",
            "tests/fixtures/measured/e2e_serving_sample.csv",
            "--format",
            "json",
        ])
        .args(extra)
        .output()
        .unwrap()
}

fn predicted_tpots(out: &std::process::Output) -> Vec<f64> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["predicted_tpot_ms"].as_f64().unwrap())
        .collect()
}

#[test]
fn set_overrides_apply_to_every_e2e_run() {
    let base = predicted_tpots(&validate_sample(&[]));
    // More bandwidth never slows a run; here it speeds every one up.
    let fast = predicted_tpots(&validate_sample(&["--set", "gpu.memory_bandwidth=20 TB/s"]));
    assert_eq!(base.len(), fast.len());
    assert!(
        base.iter().zip(&fast).all(|(b, f)| f < b),
        "{base:?} {fast:?}"
    );
    // A larger fixed cost per kernel slows every run.
    let slow = predicted_tpots(&validate_sample(&["--set", "engine.kernel_gap=10 us"]));
    assert!(
        base.iter().zip(&slow).all(|(b, s)| s > b),
        "{base:?} {slow:?}"
    );
}

#[test]
fn e2e_validation_refuses_options_it_cannot_honour() {
    // A field no description has: the user's error, not a skipped run.
    let out = validate_sample(&["--set", "engine.kernel_gapx=2 us"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("kernel_gapx"));
    // Each run names its own layout and engine: --tp and --engine are refused, not ignored.
    for flag in [["--tp", "2"], ["--engine", "sglang"]] {
        let out = validate_sample(&flag);
        assert_eq!(out.status.code(), Some(1), "{flag:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(flag[0]) && err.contains("each run names"),
            "{err}"
        );
    }
}

/// `--group-by` keys the error summary by the fields asked, in order, each once; every
/// evaluated run lands in exactly one group. It applies to e2e files only.
#[test]
fn group_by_keys_the_summary_by_the_fields_asked() {
    let out = validate_sample(&["--group-by", "version,precision,version,osl"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["group_by"],
        serde_json::json!(["version", "precision", "osl"])
    );
    let groups = v["groups"].as_array().unwrap();
    let mut n = 0;
    for g in groups {
        let key = g["key"].as_array().unwrap();
        let fields: Vec<&str> = key.iter().map(|p| p[0].as_str().unwrap()).collect();
        assert_eq!(fields, ["version", "precision", "osl"]);
        // Fields the grouping does not split by read "*".
        assert_eq!(g["backend"], "*");
        n += g["tpot"]["n"].as_u64().unwrap();
    }
    assert_eq!(n, v["overall_tpot"]["n"].as_u64().unwrap());
    let runs = v["runs"].as_array().unwrap();
    assert!(runs.iter().all(|r| r["precision"].is_string()));
    // The two runs differ in output length: two groups.
    assert_eq!(groups.len(), 2, "{v}");
    // A kernel table or the team's record is not grouped: refused, not ignored, even when
    // the fields asked are the e2e default.
    for fields in ["version", "backend,system,model"] {
        let out = Command::cargo_bin("rooftop")
            .unwrap()
            .args(["validate", "--group-by", fields])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{fields}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--group-by"));
    }
}

/// `calibrate` on an e2e serving CSV without `--holdout` is refused with what to run
/// instead, not read as a kernel table.
#[test]
fn calibrate_without_holdout_refuses_an_e2e_csv_and_says_what_to_run() {
    let out = Command::cargo_bin("rooftop")
        .unwrap()
        .args([
            "calibrate",
            "--measured",
            "tests/fixtures/measured/e2e_serving_sample.csv",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("e2e_serving_sample.csv") && err.contains("--holdout 3"),
        "{err}"
    );
}

/// A row that repeats an earlier one field for field is the same measurement written twice:
/// it is counted once, with the reason, and the first copy's prediction is unchanged. A row
/// that differs in one measured digit is a run of its own.
#[test]
fn a_repeated_row_is_one_measurement_counted_once() {
    let sample = std::fs::read_to_string("tests/fixtures/measured/e2e_serving_sample.csv").unwrap();
    let lines: Vec<&str> = sample.lines().collect();
    let first_run = lines[1];
    let near_twin = first_run.replace("190.9545068625", "190.9545068626");
    let text = format!("{sample}{first_run}\n{near_twin}\n");
    let v = validate_text(&text);
    assert_eq!(v["total_runs"], 6);
    // The two Llama runs of the sample and the near twin; the exact repeat is set aside.
    assert_eq!(v["overall_tpot"]["n"], 3);
    let repeat = skipped_for(&v, "field for field");
    assert_eq!(repeat["runs"], 1);
    assert_eq!(repeat["first_line"], 6);
    let runs = v["runs"].as_array().unwrap();
    let lines_evaluated: Vec<u64> = runs.iter().map(|r| r["line"].as_u64().unwrap()).collect();
    assert!(lines_evaluated.contains(&2) && lines_evaluated.contains(&7));
    assert!(!lines_evaluated.contains(&6));
}

/// A row that carries an earlier row's measured times to the last digit under another
/// layout is the same measurement labelled twice: the earlier row is kept, the later set
/// aside with the reason.
#[test]
fn a_measurement_under_a_second_layout_is_counted_once_as_the_first() {
    let sample = std::fs::read_to_string("tests/fixtures/measured/e2e_serving_sample.csv").unwrap();
    let first_run = sample.lines().nth(1).unwrap();
    let relabelled = first_run.replace(",8.0,1.0,1.0,,1.0,1.0,", ",8.0,2.0,1.0,,2.0,1.0,");
    assert_ne!(relabelled, first_run);
    let v = validate_text(&format!("{sample}{relabelled}\n"));
    assert_eq!(v["overall_tpot"]["n"], 2);
    let set_aside = skipped_for(&v, "labelled twice");
    assert_eq!(set_aside["first_line"], 6);
    let kept = &v["runs"].as_array().unwrap()[0];
    assert_eq!(
        (kept["line"].as_u64(), kept["parallel"].as_str()),
        (Some(2), Some("tp1"))
    );
}

/// The lines of the runs a validation evaluated.
fn evaluated_lines(v: &serde_json::Value) -> Vec<u64> {
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["line"].as_u64().unwrap())
        .collect()
}

/// `validate --format json` on an e2e serving CSV of `text`, written to a temporary file.
fn validate_text(text: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.csv");
    std::fs::write(&path, text).unwrap();
    common::json_of(&[
        "validate",
        "--measured",
        path.to_str().unwrap(),
        "--format",
        "json",
    ])
}

/// The skipped entry of a validation whose reason contains `why`.
fn skipped_for<'v>(v: &'v serde_json::Value, why: &str) -> &'v serde_json::Value {
    v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["reason"].as_str().unwrap().contains(why))
        .unwrap_or_else(|| panic!("no skipped entry for \"{why}\": {v}"))
}

/// A run measured faster than the speed of light of the batch it maps to did not decode what
/// the file says (fewer sequences at once, several tokens a step, or a smaller KV cache): it is
/// set aside with the reason, not compared with a prediction for another configuration. The
/// same run at a TPOT its batch allows is evaluated, so the bound, not the row, decides.
#[test]
fn a_run_faster_than_its_batch_allows_is_set_aside_with_the_reason() {
    let sample = std::fs::read_to_string("tests/fixtures/measured/e2e_serving_sample.csv").unwrap();
    let first_run = sample.lines().nth(1).unwrap();
    // Llama-3.1-8B on one H100 at 256 requests of 1,024 + 128 tokens: the weights and 256
    // caches of ~1,100 tokens cannot be read in 7.9 ms (about 15 ms at 3.35 TB/s), though one
    // sequence's step can (about 5 ms).
    let wide = first_run
        .replace(",8.0,1.0,1.0,,1.0,1.0,", ",256.0,1.0,1.0,,1.0,1.0,")
        .replace("190.9545068625", "2190.9545068625");
    assert_ne!(wide, first_run);
    let v = validate_text(&format!("{sample}{wide}\n"));
    let set_aside = skipped_for(&v, "below the speed-of-light decode step");
    assert_eq!(set_aside["first_line"], 6);
    assert_eq!(set_aside["runs"], 1);
    let lines = evaluated_lines(&v);
    assert!(!lines.contains(&6), "{lines:?}");
    let allowed = wide.replace(",7.94357745", ",40.0");
    assert_ne!(allowed, wide);
    let v = validate_text(&format!("{sample}{allowed}\n"));
    let lines = evaluated_lines(&v);
    assert!(lines.contains(&6), "{lines:?}");
}

/// A serving CSV is told by the columns that say how its runs were made: one whose measured
/// column is misspelt is refused naming the column it lacks (before, it fell through to the
/// GEMM reader: "missing column `m`"), and explain and plot, which read one scenario's
/// measurement, refuse a serving CSV and say to validate it.
#[test]
fn a_serving_csv_is_recognised_by_its_run_columns() {
    let sample = std::fs::read_to_string("tests/fixtures/measured/e2e_serving_sample.csv").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("renamed.csv");
    std::fs::write(&renamed, sample.replacen("silicon_tpot_ms", "tpot_ms", 1)).unwrap();
    let f = renamed.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = common::output_of(args);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, e) = run(&["validate", "--measured", f]);
    assert_eq!(code, Some(1), "{e}");
    assert!(e.contains("missing column `silicon_tpot_ms`"), "{e}");
    let png = dir.path().join("p.png");
    for args in [
        vec!["explain", "--measured", f],
        vec![
            "plot",
            "sweep",
            "--measured",
            f,
            "--out",
            png.to_str().unwrap(),
        ],
    ] {
        let (code, e) = run(&args);
        assert_eq!(code, Some(1), "{args:?}: {e}");
        assert!(
            e.contains("a serving CSV of runs of many deployments"),
            "{args:?}: {e}"
        );
        assert!(e.contains("rooftop validate --measured"), "{args:?}: {e}");
    }
    assert!(!png.exists());
}

/// A run whose measured TTFT is below the speed-of-light prefill of the shortest prompt its
/// client sends cannot be the configuration it maps to (a prefix cache the file does not
/// record, or a wrong value): it is set aside with the reason, as a TPOT below the speed of
/// light is, never scored (a TTFT of 10 µs was scored as a 2,255,939 % error).
#[test]
fn a_ttft_faster_than_light_is_set_aside_with_the_reason() {
    let sample = std::fs::read_to_string("tests/fixtures/measured/e2e_serving_sample.csv").unwrap();
    let first_run = sample.lines().nth(1).unwrap();
    let mut fields: Vec<&str> = first_run.split(',').collect();
    fields[15] = "0.01"; // silicon_ttft_ms
    let fast = fields.join(",");
    let v = validate_text(&format!("{sample}{fast}\n"));
    let set_aside = skipped_for(&v, "measured TTFT below the speed-of-light prefill");
    assert_eq!(set_aside["runs"], 1);
    assert_eq!(set_aside["first_line"], 6);
    assert!(!evaluated_lines(&v).contains(&6));
}
