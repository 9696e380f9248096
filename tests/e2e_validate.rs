//! `rooftop validate` on an e2e serving CSV: runs with a description are predicted and
//! summarised; runs without one, or with a layout rooftop cannot express, are counted as
//! skipped with the reason, never guessed.

use assert_cmd::Command;

#[test]
fn e2e_csv_is_validated_run_by_run_and_skips_name_their_reason() {
    let out = Command::cargo_bin("rooftop")
        .unwrap()
        .args([
            "validate",
            "--measured",
            "tests/fixtures/measured/e2e_serving_sample.csv",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
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
    assert!(reasons.iter().any(|r| r.contains("needs 64 GPUs")));
}
