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
    ("b200", "gemm", 0.048),
    ("b200", "attention_decode", 0.079),
    ("b200", "moe", 0.092),
    ("b200", "mla_decode_module", 0.095),
    ("b200", "nccl", 0.067),
    ("b200", "vllm_custom_allreduce", 0.073),
    ("h100-sxm", "gemm", 0.051),
    ("h100-sxm", "attention_decode", 0.081),
    ("h100-sxm", "moe", 0.085),
    ("h100-sxm", "mla_decode_module", 0.069),
    ("h100-sxm", "nccl", 0.081),
    ("h100-sxm", "vllm_custom_allreduce", 0.066),
    ("l40s", "gemm", 0.081),
    ("l40s", "attention_decode", 0.088),
    ("l40s", "moe", 0.080),
    ("l40s", "mla_decode_module", 0.052),
    ("l40s", "nccl", 0.095),
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
    readme_table_quotes_these_figures(&v);
    // Every row's error is its prediction against its measurement.
    for r in &v.rows {
        assert!(r.sol > 0.0 && r.sol <= r.default * (1.0 + 1e-9), "{r:?}");
        assert!(((r.default - r.measured) / r.measured - r.default_error).abs() < 1e-9);
    }
}

/// The README's family × GPU table of median / p90 |error| quotes today's figures (to the
/// 0.1 % it prints): a change that moves a family updates the table in the same commit.
fn readme_table_quotes_these_figures(v: &rooftop::commands::kernel_validate::KernelValidation) {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let head = "| family | B200 median / p90 | H100 SXM median / p90 | L40S median / p90 |";
    let at = readme.find(head).expect("the README's kernel table");
    let rows = [
        ("| GEMM", "gemm"),
        ("| fused MoE", "moe"),
        ("| decode attention", "attention_decode"),
        ("| MLA decode module", "mla_decode_module"),
        ("| NCCL collectives", "nccl"),
        ("| vLLM custom all-reduce", "vllm_custom_allreduce"),
    ];
    let mut stale = Vec::new();
    let mut seen = 0;
    for line in readme[at..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
    {
        let Some(&(_, family)) = rows.iter().find(|(p, _)| line.starts_with(p)) else {
            panic!("README kernel table row for no known family: {line}");
        };
        seen += 1;
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        for (cell, gpu) in cells[2..5].iter().zip(["b200", "h100-sxm", "l40s"]) {
            let s = v
                .summary
                .iter()
                .find(|s| s.gpu == gpu && s.family.name() == family && s.format == "all");
            let quoted: Vec<f64> = cell
                .trim_end_matches('%')
                .split('/')
                .filter_map(|x| x.trim().parse().ok())
                .collect();
            match (s, quoted.as_slice()) {
                (None, []) => {}
                (Some(s), [m, p]) => {
                    let (am, ap) = (s.median_abs_error * 100.0, s.p90_abs_error * 100.0);
                    if (m - am).abs() > 0.051 || (p - ap).abs() > 0.051 {
                        stale.push(format!(
                            "{family} {gpu}: README {m:.1} / {p:.1} %, today {am:.1} / {ap:.1} %"
                        ));
                    }
                }
                _ => stale.push(format!("{family} {gpu}: README cell `{cell}` vs {s:?}")),
            }
        }
    }
    assert_eq!(seen, rows.len(), "README kernel table rows");
    assert!(
        stale.is_empty(),
        "README kernel table out of date (rooftop validate --measured ../shared/measured/dev):\n{}",
        stale.join("\n")
    );
}

/// The MXFP4 experts the engines run for gpt-oss (FlashInfer trtllm-gen on B200, OpenAI's
/// Triton kernel on H100) are priced by their generation's `mxfp4` family, and the Marlin
/// rows of the same dtype by the Marlin family: each kernel's rows stay near their own
/// measurements (medians were 29 % and 51 % when one family priced both kernels).
#[test]
fn mxfp4_moe_rows_are_priced_by_the_kernel_that_ran_them() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/measured/dev");
    let (tables, _) = kernel_tables(&[dir.to_string()]).unwrap().unwrap();
    let v = validation(&args(), &tables, Vec::new()).unwrap();
    let median = |gpu: &str, marlin: bool| {
        let mut e: Vec<f64> = v
            .rows
            .iter()
            .filter(|r| r.gpu == gpu && r.format == "w4a16_mxfp4")
            .filter(|r| r.kernel.contains("marlin") == marlin)
            .map(|r| r.default_error.abs())
            .collect();
        assert!(e.len() >= 100, "{gpu}: {} rows", e.len());
        e.sort_by(f64::total_cmp);
        e[e.len() / 2]
    };
    for gpu in ["b200", "h100-sxm"] {
        let engine_kernel = median(gpu, false);
        assert!(
            engine_kernel < 0.25,
            "{gpu} gpt-oss MXFP4 rows: median {engine_kernel}"
        );
    }
    // Marlin on Hopper, where its int4 rows fit well, prices its MXFP4 rows alike.
    let marlin = median("h100-sxm", true);
    assert!(marlin < 0.25, "h100-sxm Marlin MXFP4 rows: median {marlin}");
}

#[test]
fn a_harness_serial_cost_per_item_holds_only_the_batches_it_was_seen_at() {
    use rooftop::kernel_check::check_table;
    use rooftop::measured::kernel_table::parse_kernel_table;
    use rooftop::spec::System;
    // FlashAttention 4 rows on H100: the harness's call takes 2.4 us per (sequence, KV
    // head) in series up to batch 512, and not beyond.
    let head = "batch,context,heads,kv_heads,head_dim,kv_dtype,window,latency_ms,kernel\n";
    let row = |b: u32| format!("{b},3,2,1,512,bfloat16,0,0.1,vllm_flash_attn_fa4\n");
    let table = parse_kernel_table(
        &format!("{head}{}{}", row(256), row(2048)),
        "attention_decode_h100-sxm.csv",
    )
    .unwrap();
    let sys = System::load("8x-h100-nvlink").unwrap();
    let rows = check_table(&table, &sys, None).unwrap();
    let (small, large) = (rows[0].default, rows[1].default);
    // In microseconds, as the table rows are.
    assert!(small >= 256.0 * 2.4 - 1e-6, "{small}");
    assert!(large < 2048.0 * 2.4, "{large}");
}
