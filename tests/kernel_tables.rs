//! `rooftop validate` over the dev kernel tables (`../shared/measured/dev`, real kernels on
//! H100 SXM, B200 and L40S): every table reads, no row is refused, and no family's median
//! error on any GPU gets worse than the figure recorded here. It guards against regressions;
//! it fits nothing. When a change improves a figure, lower it here in the same commit.
//!
//! Regenerate the figures with
//! `rooftop validate --measured ../shared/measured/dev --format json` (the `summary` rows
//! whose `format` is `all`).

use rooftop::cli::ScenarioArgs;
use rooftop::commands::kernel_validate::{kernel_tables, validation};
use std::path::Path;

/// (GPU, family, recorded median |error|): the ceiling each may not exceed.
const RECORDED: &[(&str, &str, f64)] = &[
    ("b200", "gemm", 0.088),
    ("b200", "moe", 0.110),
    ("b200", "attention_decode", 0.142),
    ("b200", "mla_decode_module", 0.097),
    ("b200", "nccl", 0.063),
    ("b200", "vllm_custom_allreduce", 0.129),
    ("h100-sxm", "gemm", 0.067),
    ("h100-sxm", "moe", 0.115),
    ("h100-sxm", "attention_decode", 0.174),
    ("h100-sxm", "mla_decode_module", 0.070),
    ("h100-sxm", "nccl", 0.076),
    ("h100-sxm", "vllm_custom_allreduce", 0.091),
    ("l40s", "gemm", 0.102),
    ("l40s", "moe", 0.110),
    ("l40s", "attention_decode", 0.291),
    ("l40s", "mla_decode_module", 0.100),
    ("l40s", "nccl", 0.091),
];

/// Rounding slack of the recorded figures (they are written to 0.1 %).
const SLACK: f64 = 0.0005;

fn args() -> ScenarioArgs {
    ScenarioArgs {
        model: "kimi-k2.5-int4".into(),
        system: "8x-h100-nvlink".into(),
        tp: None,
        ep: None,
        pp: None,
        dp: None,
        engine: None,
        calibration: None,
        transfer_calibration: false,
        set: Vec::new(),
    }
}

#[test]
fn dev_kernel_tables_stay_within_their_recorded_medians() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/measured/dev");
    assert!(
        Path::new(dir).is_dir(),
        "the dev kernel tables are expected at {dir}"
    );
    let (tables, _) = kernel_tables(&[dir.to_string()]).unwrap().unwrap();
    assert_eq!(tables.len(), 17, "{tables:?}");
    let v = validation(&args(), &tables, Vec::new()).unwrap();
    let mut worse = Vec::new();
    for (gpu, family, recorded) in RECORDED {
        let s = v
            .summary
            .iter()
            .find(|s| s.gpu == *gpu && s.family.name() == *family && s.format == "all")
            .unwrap_or_else(|| panic!("no {family} rows for {gpu}"));
        assert!(s.n > 0);
        if s.median_abs_error > recorded + SLACK {
            worse.push(format!(
                "{gpu} {family}: median {:.1} % > recorded {:.1} %",
                s.median_abs_error * 100.0,
                recorded * 100.0
            ));
        }
    }
    assert!(worse.is_empty(), "regressions:\n{}", worse.join("\n"));
    // Every row's error is its prediction against its measurement.
    for r in &v.rows {
        assert!(r.sol > 0.0 && r.sol <= r.default * (1.0 + 1e-9), "{r:?}");
        assert!(((r.default - r.measured) / r.measured - r.default_error).abs() < 1e-9);
    }
}
