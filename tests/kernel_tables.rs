//! `rooftop validate` over the dev kernel tables (`tests/data/dev`, a copy of
//! `shared/measured/dev`: real kernels on H100 SXM, B200 and L40S): every table reads, no row
//! is refused, and no family's median error on any GPU gets worse than the figure recorded
//! here. It guards against regressions; it fits nothing. When a change improves a figure,
//! lower it here in the same commit. Where `../shared` sits beside the checkout, its folders
//! (which may hold newer rows) are held to the same bars as well.
//!
//! Regenerate the figures with
//! `rooftop validate --measured tests/data/dev --format json` (the `summary` rows
//! whose `format` is `all`).

mod common;

use rooftop::cli::ScenarioArgs;
use rooftop::commands::kernel_validate::{kernel_tables, validation};
use std::path::Path;

/// (GPU, family, recorded median |error|): the ceiling each may not exceed.
const RECORDED: &[(&str, &str, f64)] = &[
    ("b200", "gemm", 0.048),
    ("b200", "attention_decode", 0.079),
    ("b200", "moe", 0.092),
    ("b200", "mla_decode_module", 0.094),
    ("b200", "nccl", 0.067),
    ("b200", "vllm_custom_allreduce", 0.073),
    ("h100-sxm", "gemm", 0.051),
    ("h100-sxm", "attention_decode", 0.081),
    ("h100-sxm", "moe", 0.085),
    ("h100-sxm", "mla_decode_module", 0.069),
    ("h100-sxm", "nccl", 0.078),
    ("h100-sxm", "vllm_custom_allreduce", 0.066),
    ("l40s", "gemm", 0.081),
    ("l40s", "attention_decode", 0.088),
    ("l40s", "moe", 0.080),
    ("l40s", "mla_decode_module", 0.052),
    ("l40s", "nccl", 0.094),
];

/// The same for the SM120 tables (`tests/data/dev-sm120`, RTX PRO 6000 Server), per
/// family and format: the bar every cell of them is held to is a median of at most 10 % and
/// a p90 of at most 30 %; the recorded figures are today's, which may not get worse.
/// (GPU, family, format, recorded median, recorded p90.)
const RECORDED_SM120: &[(&str, &str, f64, f64)] = &[
    ("gemm", "bf16", 0.080, 0.339),
    ("gemm", "fp8", 0.054, 0.149),
    ("gemm", "fp8-block", 0.020, 0.047),
    ("gemm", "nvfp4", 0.041, 0.202),
    ("moe", "bfloat16", 0.060, 0.287),
    ("moe", "fp8", 0.063, 0.274),
    ("moe", "nvfp4", 0.080, 0.242),
    ("moe", "w4a16_mxfp4", 0.064, 0.238),
    ("attention_decode", "kv bfloat16", 0.089, 0.292),
    ("attention_decode", "kv fp8", 0.091, 0.281),
    ("nccl", "all_gather", 0.034, 0.159),
    ("nccl", "alltoall", 0.070, 0.272),
    ("nccl", "reduce_scatter", 0.059, 0.162),
];

/// The one SM120 cell above the 30 % p90 bar, and why (README, "Kernel fidelity"): cuBLAS's
/// BF16 calls of a few microseconds run under the engine's 3 us kernel gap, as on every
/// GPU's table, and its choice among kernels for mid shapes is not public.
const SM120_OVER_P90: &[(&str, &str)] = &[("gemm", "bf16")];

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
        redundant_experts: None,
        engine: None,
        calibration: None,
        transfer_calibration: false,
        set: Vec::new(),
    }
}

/// `rooftop validate` over every table of `dir`, priced on `system`'s GPU where a table
/// names no other. The repository's copy holds exactly `count` tables (the figures the
/// README quotes); the shared folder at least as many (it may grow).
fn validate_dir(
    dir: &Path,
    count: usize,
    exact: bool,
    system: &str,
) -> rooftop::commands::kernel_validate::KernelValidation {
    assert!(
        dir.is_dir(),
        "the kernel tables are expected at {}",
        dir.display()
    );
    let (tables, _) = kernel_tables(&[dir.display().to_string()])
        .unwrap()
        .unwrap();
    if exact {
        assert_eq!(tables.len(), count, "{}: {tables:?}", dir.display());
    } else {
        assert!(tables.len() >= count, "{}: {tables:?}", dir.display());
    }
    let mut a = args();
    a.system = system.into();
    validation(&a, &tables, Vec::new()).unwrap()
}

/// The repository's copy of `folder`, then the shared folder's when present, each with
/// whether it is the repository's.
fn validate_folder(
    folder: &str,
    count: usize,
    system: &str,
) -> Vec<(bool, rooftop::commands::kernel_validate::KernelValidation)> {
    let mut out = vec![(
        true,
        validate_dir(&common::data(folder), count, true, system),
    )];
    if let Some(shared) = common::shared(&format!("measured/{folder}")) {
        out.push((false, validate_dir(&shared, count, false, system)));
    }
    out
}

#[test]
fn dev_kernel_tables_stay_within_their_recorded_medians() {
    for (repo_copy, v) in validate_folder("dev", 17, "8x-h100-nvlink") {
        dev_tables_hold_their_figures(&v, repo_copy);
    }
}

fn dev_tables_hold_their_figures(
    v: &rooftop::commands::kernel_validate::KernelValidation,
    repo_copy: bool,
) {
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
    if repo_copy {
        readme_table_quotes_these_figures(v, &["b200", "h100-sxm", "l40s"]);
    }
    // Every row's error is its prediction against its measurement.
    for r in &v.rows {
        assert!(r.sol > 0.0 && r.sol <= r.default * (1.0 + 1e-9), "{r:?}");
        assert!(((r.default - r.measured) / r.measured - r.default_error).abs() < 1e-9);
    }
}

/// The README's family × GPU table of median / p90 |error| quotes today's figures (to the
/// 0.1 % it prints): a change that moves a family updates the table in the same commit.
fn readme_table_quotes_these_figures(
    v: &rooftop::commands::kernel_validate::KernelValidation,
    gpus: &[&str],
) {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let head = "| family | B200 median / p90 | H100 SXM median / p90 | L40S median / p90 | RTX PRO 6000 Server median / p90 |";
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
        let all = ["b200", "h100-sxm", "l40s", "rtx-pro-6000-server"];
        for (cell, gpu) in cells[2..6].iter().zip(all) {
            if !gpus.contains(&gpu) {
                continue;
            }
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
        "README kernel table out of date (rooftop validate --measured tests/data/dev):\n{}",
        stale.join("\n")
    );
}

#[test]
fn sm120_kernel_tables_meet_the_bar_with_one_reported_exception() {
    for (repo_copy, v) in validate_folder("dev-sm120", 4, "8x-rtx-pro-6000-server-pcie") {
        sm120_tables_hold_their_figures(&v, repo_copy);
    }
}

fn sm120_tables_hold_their_figures(
    v: &rooftop::commands::kernel_validate::KernelValidation,
    repo_copy: bool,
) {
    let mut bad = Vec::new();
    let formats = v
        .summary
        .iter()
        .filter(|s| s.gpu == "rtx-pro-6000-server" && s.format != "all");
    for s in formats {
        let family = s.family.name();
        let Some(&(_, _, median, p90)) = RECORDED_SM120
            .iter()
            .find(|r| r.0 == family && r.1 == s.format)
        else {
            bad.push(format!("{family} {}: no recorded figure", s.format));
            continue;
        };
        let excused = SM120_OVER_P90.contains(&(family, s.format.as_str()));
        if s.median_abs_error > 0.10 || (s.p90_abs_error > 0.30 && !excused) {
            bad.push(format!(
                "{family} {}: {:.1} / {:.1} % over the 10 / 30 % bar",
                s.format,
                s.median_abs_error * 100.0,
                s.p90_abs_error * 100.0
            ));
        }
        if s.median_abs_error > median + SLACK || s.p90_abs_error > p90 + SLACK {
            bad.push(format!(
                "{family} {}: {:.1} / {:.1} % worse than recorded {:.1} / {:.1} %",
                s.format,
                s.median_abs_error * 100.0,
                s.p90_abs_error * 100.0,
                median * 100.0,
                p90 * 100.0
            ));
        }
    }
    assert!(bad.is_empty(), "SM120 tables:\n{}", bad.join("\n"));
    if repo_copy {
        readme_table_quotes_these_figures(v, &["rtx-pro-6000-server"]);
    }
    for r in &v.rows {
        assert!(r.sol > 0.0 && r.sol <= r.default * (1.0 + 1e-9), "{r:?}");
    }
}

/// The MXFP4 experts the engines run for gpt-oss (FlashInfer trtllm-gen on B200, OpenAI's
/// Triton kernel on H100) are priced by their generation's `mxfp4` family, and the Marlin
/// rows of the same dtype by the Marlin family: each kernel's rows stay near their own
/// measurements (medians were 29 % and 51 % when one family priced both kernels).
#[test]
fn mxfp4_moe_rows_are_priced_by_the_kernel_that_ran_them() {
    let dir = common::data("dev");
    let (tables, _) = kernel_tables(&[dir.display().to_string()])
        .unwrap()
        .unwrap();
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

/// A collective row over more GPUs than the system it is priced on has ran elsewhere: it is
/// refused with its line, as calibrate refuses it, not priced over GPUs that are not there
/// (and `--system` with enough GPUs of that kind prices it).
#[test]
fn a_collective_row_over_more_gpus_than_the_system_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("nccl_h100-sxm.csv");
    std::fs::write(
        &table,
        "collective,gpus,bytes,latency_ms,nccl\nall_reduce,16,1048576,0.05,2.29.2\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["validate", "--measured", table.to_str().unwrap()];
        args.extend(extra);
        common::output_of(&args)
    };
    let out = run(&[]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains(":2:") && e.contains("over 16 GPUs, but 8x-h100-nvlink has 8"),
        "{e}"
    );
    assert!(run(&["--system", "2x8-h100-ib"]).status.success());
}

/// A table measured on one GPU (its file name says which) validated against a `--system`
/// of another GPU is refused, naming both, as `calibrate` refuses it; it was priced on the
/// file's GPU instead, the `--system` silently dropped. Without `--system`, or with one of
/// the same GPU, it runs.
#[test]
fn a_kernel_table_of_another_gpu_than_the_given_system_is_refused() {
    let table = common::data("dev").join("gemm_b200.csv");
    let table = table.to_str().unwrap();
    let e = common::failure_of(&[
        "validate",
        "--measured",
        table,
        "--system",
        "8x-h100-nvlink",
    ]);
    assert!(
        e.contains("gemm_b200.csv")
            && e.contains("GPU \"b200\"")
            && e.contains("\"8x-h100-nvlink\" has GPU \"h100-sxm\""),
        "{e}"
    );
    for ok in [vec![], vec!["--system", "8x-b200-nvlink"]] {
        let mut args = vec!["validate", "--measured", table, "--format", "json"];
        args.extend(ok);
        let v = common::json_of(&args);
        assert_eq!(v["tables"][0]["system"], "8x-b200-nvlink", "{v}");
    }
}

/// A MoE row's speed of light is never below its hardware floor: weights a repeating
/// harness finds in L2 still cross L2 at its bandwidth (they were free at the speed of
/// light, 530 dev rows sat below a tenth of their floor, an EP64 H100 row at 0.076 µs
/// against 1.64 µs).
#[test]
fn a_moe_rows_speed_of_light_is_never_below_its_floor() {
    for gpu in ["h100-sxm", "b200", "l40s"] {
        let table = common::data(&format!("dev/moe_{gpu}.csv"));
        let v = common::json_of(&[
            "validate",
            "--measured",
            table.to_str().unwrap(),
            "--format",
            "json",
        ]);
        let rows = v["rows"].as_array().unwrap();
        assert!(!rows.is_empty(), "{gpu}");
        for r in rows {
            let (sol, floor) = (r["sol"].as_f64().unwrap(), r["floor"].as_f64().unwrap());
            assert!(
                sol >= floor * (1.0 - 1e-9),
                "{gpu} {}: sol {sol} < floor {floor}",
                r["point"]
            );
        }
    }
}

/// The speed of light is a bound: no row the floor does not flag (`below_floor`) ran faster
/// than its speed-of-light column, on any dev or SM120 table. A repeated attention or MoE
/// call just larger than L2 keeps what L2 holds of it between repeats; its speed of light
/// charged every byte at DRAM, and 28 rows ran faster than that (an SM120 attention row at
/// 60.05 µs against a "speed of light" of 74.93 µs).
#[test]
fn no_row_runs_faster_than_its_speed_of_light_unless_flagged_below_the_floor() {
    for (folder, system) in [
        ("dev", "8x-h100-nvlink"),
        ("dev-sm120", "8x-rtx-pro-6000-server-pcie"),
    ] {
        for (_, v) in validate_folder(folder, if folder == "dev" { 17 } else { 4 }, system) {
            for r in &v.rows {
                assert!(
                    r.below_floor || r.sol <= r.measured * (1.0 + 1e-9),
                    "{}: {} measured {:.2} us, speed of light {:.2} us",
                    r.origin,
                    r.point,
                    r.measured,
                    r.sol
                );
            }
        }
    }
}
