//! The README's "JSON fields" section stays true: every field it names for a command is in
//! that command's real `--format json` output (as a key at any depth, or as a value where
//! the README names values, such as `provenance` = `default` | `calibrated`). The list is
//! read from the README, not copied here; only which commands to run for each bullet is.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeSet;

fn rooftop() -> Command {
    Command::cargo_bin("rooftop").unwrap()
}

/// The bullets of the README's "JSON fields" section: (label, backticked names after it).
fn documented() -> Vec<(String, Vec<String>)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let start = readme
        .find("## JSON fields")
        .expect("a JSON fields section");
    let rest = &readme[start + 3..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut bullets: Vec<String> = Vec::new();
    for line in section.lines() {
        if let Some(b) = line.strip_prefix("- ") {
            bullets.push(b.to_string());
        } else if line.starts_with("  ") {
            if let Some(last) = bullets.last_mut() {
                last.push(' ');
                last.push_str(line.trim());
            }
        }
    }
    bullets
        .iter()
        .map(|b| {
            let ticked: Vec<String> = b.split('`').skip(1).step_by(2).map(String::from).collect();
            let (label, rest) = ticked.split_first().expect("a bullet names its command");
            // Names only: flags such as `--calibration` in the prose are not fields.
            let fields = rest
                .iter()
                .filter(|f| {
                    f.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                })
                .cloned()
                .collect();
            (label.clone(), fields)
        })
        .collect()
}

/// Every key and every string value in a JSON document.
fn names(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                names(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| names(x, out)),
        Value::String(s) => {
            out.insert(s.clone());
        }
        _ => {}
    }
}

fn run_json(args: &[&str]) -> Vec<Value> {
    let out = rooftop().args(args).assert().success().get_output().clone();
    let text = String::from_utf8(out.stdout).unwrap();
    // One document, or JSON lines (explore).
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => vec![v],
        Err(_) => text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: {e}: {l}")))
            .collect(),
    }
}

#[test]
fn every_field_the_readme_documents_is_in_real_json_output() {
    let dir = tempfile::tempdir().unwrap();
    let cal = dir.path().join("cal.toml");
    let cal = cal.to_str().unwrap();
    rooftop()
        .args(["calibrate", "--out", cal, "--format", "json"])
        .assert()
        .success();
    let runs = |label: &str| -> Vec<Vec<&str>> {
        match label {
            "predict" => vec![
                vec!["predict", "--format", "json"],
                vec!["predict", "--calibration", cal, "--format", "json"],
            ],
            "op ..." => vec![
                vec![
                    "op", "gemm", "--gpu", "h200", "--m", "16", "--n", "7168", "--k", "2048",
                    "--format", "json",
                ],
                vec![
                    "op",
                    "allreduce",
                    "--system",
                    "8x-h200-nvlink",
                    "--bytes",
                    "14336",
                    "--format",
                    "json",
                ],
            ],
            "sweep" => vec![vec![
                "sweep",
                "--calibration",
                cal,
                "--concurrency",
                "1,64",
                "--format",
                "json",
            ]],
            "sweep --prefill P --decode D" => vec![
                vec![
                    "sweep",
                    "--model",
                    "deepseek-v3-fp8",
                    "--system",
                    "8x-b200-nvlink",
                    "--prefill",
                    "workers=1,tp=8,ep=8",
                    "--decode",
                    "workers=1,dp=8,ep=8",
                    "--concurrency",
                    "8,512",
                    "--format",
                    "json",
                ],
                vec![
                    "compare",
                    "--model",
                    "deepseek-v3-fp8",
                    "--systems",
                    "8x-b200-nvlink,8x-l40s-pcie",
                    "--prefill",
                    "workers=1,tp=8,ep=8",
                    "--decode",
                    "workers=1,dp=8,ep=8",
                    "--format",
                    "json",
                ],
            ],
            "validate --measured DISAGG.csv" => vec![vec![
                "validate",
                "--measured",
                "tests/data/dev/e2e_disagg.csv",
                "--format",
                "json",
            ]],
            "validate --measured SPECDEC.csv" => vec![vec![
                "validate",
                "--measured",
                "tests/data/dev/specdec_runs.csv",
                "--format",
                "json",
            ]],
            "calibrate" => vec![vec!["calibrate", "--format", "json"]],
            "calibrate --holdout N" => vec![vec![
                "calibrate",
                "--measured",
                "tests/fixtures/measured/e2e_serving_sample.csv",
                "--holdout",
                "1",
                "--format",
                "json",
            ]],
            "validate" => vec![vec!["validate", "--format", "json"]],
            "validate --measured E2E.csv" => vec![vec![
                "validate",
                "--measured",
                "tests/fixtures/measured/e2e_serving_sample.csv",
                "--group-by",
                "backend,version",
                "--format",
                "json",
            ]],
            "specdec" => vec![
                vec![
                    "specdec",
                    "--k",
                    "1..2",
                    "--concurrency",
                    "1",
                    "--calibration",
                    cal,
                    "--format",
                    "json",
                ],
                // A draft that stops paying as the batch grows: `breakeven`'s optional fields.
                vec![
                    "specdec",
                    "--model",
                    "llama-3.1-70b",
                    "--system",
                    "8x-h100-nvlink",
                    "--draft",
                    "eagle",
                    "--acceptance",
                    "0.6",
                    "--k",
                    "6",
                    "--concurrency",
                    "1,64,256",
                    "--context",
                    "256",
                    "--format",
                    "json",
                ],
                // A MoE verify that loses at C = 8 and pays again at 64: `pays_again_at`.
                vec![
                    "specdec",
                    "--k",
                    "3",
                    "--concurrency",
                    "1,8,64",
                    "--format",
                    "json",
                ],
            ],
            "compare" => vec![vec![
                "compare",
                "--systems",
                "8x-rtx-pro-6000-pcie,8x-h200-nvlink",
                "--calibration",
                cal,
                "--format",
                "json",
            ]],
            "compare --objective" => vec![vec![
                "compare",
                "--systems",
                "8x-rtx-pro-6000-pcie,8x-h200-nvlink",
                "--tpot-target",
                "50ms",
                "--objective",
                "cost",
                "--format",
                "json",
            ]],
            "sensitivity" => vec![vec!["sensitivity", "--format", "json"]],
            "explain" => vec![vec!["explain", "--format", "json"]],
            "plan" => vec![vec![
                "plan",
                "--model",
                "llama-3.1-8b",
                "--system",
                "8x-h100-nvlink",
                "--gpus",
                "2",
                "--tpot-target",
                "50ms",
                "--ttft-target",
                "5s",
                "--format",
                "json",
            ]],
            "explore --format json" => vec![
                vec!["explore", "--batch", "1,8", "--format", "json"],
                vec!["explore", "--batch", "1,8", "--pareto", "--format", "json"],
            ],
            other => panic!("README documents JSON of `{other}`: add how to run it here"),
        }
    };
    let bullets = documented();
    assert!(
        bullets.len() >= 9,
        "README lists {} commands",
        bullets.len()
    );
    for (label, fields) in bullets {
        let mut seen = BTreeSet::new();
        for args in runs(&label) {
            for v in run_json(&args) {
                names(&v, &mut seen);
            }
        }
        let missing: Vec<&String> = fields.iter().filter(|f| !seen.contains(*f)).collect();
        assert!(
            missing.is_empty(),
            "`{label}`: the README documents {missing:?}, absent from its JSON output"
        );
    }
}
