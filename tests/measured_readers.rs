//! Every measured-file fixture reads through `read_file` (format detected from the file) to
//! the values it holds, and every malformed fixture fails with the file and line named.

mod common;

use approx::assert_relative_eq;
use rooftop::measured::{
    read_file, read_file_with, read_files, MeasuredSet, Observation, Quantity, ReadOptions,
    TpotDef, TraceCategory,
};
use rooftop::spec::registry::{builtin_names, builtin_text, Kind};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/measured")
        .join(name)
}

fn read(name: &str) -> MeasuredSet {
    read_file(&fixture(name)).unwrap_or_else(|e| panic!("{e}"))
}

/// The error message for a malformed fixture; asserts it names the file and, where given,
/// the line (`file:line:`).
fn error(name: &str, line: Option<usize>) -> String {
    let path = fixture(name);
    let e = match read_file(&path) {
        Ok(set) => panic!("{name} read without error: {set:?}"),
        Err(e) => e.to_string(),
    };
    let shown = path.display().to_string();
    assert!(
        e.contains(&shown),
        "{name}: error does not name the file: {e}"
    );
    if let Some(l) = line {
        assert!(
            e.contains(&format!("{shown}:{l}:")),
            "{name}: error does not give line {l}: {e}"
        );
    }
    e
}

/// Compares the TPOT tuples, the seconds to relative 1e-12.
fn assert_tpots(set: &MeasuredSet, want: &[(u32, Option<u32>, u32, TpotDef, f64)]) {
    let got = tpots(set);
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!((g.0, g.1, g.2, g.3), (w.0, w.1, w.2, w.3));
        assert_relative_eq!(g.4, w.4, max_relative = 1e-12);
    }
}

fn tpots(set: &MeasuredSet) -> Vec<(u32, Option<u32>, u32, TpotDef, f64)> {
    set.observations
        .iter()
        .filter_map(|o| match o.quantity {
            Quantity::Tpot {
                concurrency,
                input_len,
                output_len,
                definition,
                seconds,
            } => Some((concurrency, input_len, output_len, definition, seconds)),
            _ => None,
        })
        .collect()
}

fn shares(set: &MeasuredSet) -> Vec<(TraceCategory, f64)> {
    set.observations
        .iter()
        .filter_map(|o| match o.quantity {
            Quantity::CategoryShare {
                category, share, ..
            } => Some((category, share)),
            _ => None,
        })
        .collect()
}

#[test]
fn team_macro_log_gives_three_e2e_tpots() {
    let set = read("k25b6000bench1_macro.log");
    assert_eq!(set.model.as_deref(), Some("/shared/kimi-k2.5-int4"));
    let t = tpots(&set);
    assert_eq!(t.len(), 3, "{t:?}");
    for (got, total) in t.iter().zip([0.407, 0.414, 0.398]) {
        assert_eq!((got.0, got.1, got.2, got.3), (1, None, 32, TpotDef::E2e));
        assert_relative_eq!(got.4, total / 32.0);
    }
    // The cut third line is the log's last, line 14.
    assert_eq!(set.observations[2].origin.line, Some(14));
    assert_eq!(set.observations.len(), 3);
}

/// Cut anywhere, the team's log gives only whole trials with their true values: a trial cut
/// inside its total time or token count is skipped, never read short.
#[test]
fn team_macro_log_cut_anywhere_reads_only_true_trials() {
    use rooftop::measured::parse_macro_log;
    let text = std::fs::read_to_string(fixture("k25b6000bench1_macro.log")).unwrap();
    let truth = [0.407 / 32.0, 0.414 / 32.0, 0.398 / 32.0];
    for (at, _) in text.char_indices().chain([(text.len(), ' ')]) {
        let Ok(set) = parse_macro_log(&text[..at], "f") else {
            continue;
        };
        let got = tpots(&set);
        assert!(got.len() <= 3);
        for (g, t) in got.iter().zip(truth) {
            assert_eq!((g.0, g.2), (1, 32), "cut at {at}");
            assert_relative_eq!(g.4, t);
        }
    }
}

#[test]
fn macro_log_errors() {
    let e = error("macro_no_trials.log", None);
    assert!(e.contains("no complete trial lines"), "{e}");
    let e = error("macro_bad_trial.log", Some(7));
    assert!(e.contains("0.414"), "{e}");
}

#[test]
fn vllm_single_object() {
    let set = read("vllm_c8.json");
    assert_eq!(set.model.as_deref(), Some("moonshotai/Kimi-K2.5"));
    assert_tpots(&set, &[(8, Some(1024), 256, TpotDef::Itl, 16.1e-3)]);
    assert_eq!(set.throughputs(), vec![(8, 462.1981)]);
    assert!(set
        .observations
        .iter()
        .any(|o| matches!(o.quantity, Quantity::Ttft { concurrency: 8, input_len: Some(1024), output_len: Some(256), seconds } if (seconds - 0.3015).abs() < 1e-12)));
}

#[test]
fn vllm_json_lines_sweep() {
    let set = read("vllm_sweep.jsonl");
    let t = tpots(&set);
    let conc: Vec<u32> = t.iter().map(|x| x.0).collect();
    assert_eq!(conc, vec![1, 32, 128]);
    assert_relative_eq!(t[2].4, 71.8e-3);
    assert_eq!(
        set.throughputs(),
        vec![(1, 78.618), (32, 1139.3602), (128, 1494.2088)]
    );
    let lines: Vec<_> = set.observations.iter().map(|o| o.origin.line).collect();
    assert_eq!(lines.first(), Some(&Some(1)));
    assert_eq!(lines.last(), Some(&Some(3)));
}

#[test]
fn vllm_errors() {
    let e = error("vllm_missing_field.jsonl", Some(2));
    assert!(e.contains("mean_tpot_ms"), "{e}");
    let e = error("vllm_truncated.json", Some(1));
    assert!(e.contains("not valid JSON"), "{e}");
}

#[test]
fn nccl_all_reduce() {
    let set = read("nccl_all_reduce_8gpu.log");
    let rows: Vec<(f64, u32, f64)> = set
        .observations
        .iter()
        .filter_map(|o| match o.quantity {
            Quantity::AllReduce {
                bytes,
                gpus,
                seconds,
            } => Some((bytes, gpus, seconds)),
            _ => None,
        })
        .collect();
    assert_eq!(rows.len(), 26);
    assert_eq!(rows.iter().filter(|r| r.1 == 8).count(), 26);
    assert_eq!(rows[0].0, 8.0);
    assert_relative_eq!(rows[0].2, 29.87e-6);
    assert_eq!(rows[25].0, 268435456.0);
    assert_relative_eq!(rows[25].2, 22124e-6);
    assert_eq!(set.observations[0].origin.line, Some(18));
}

/// nccl-tests output is held to what it says of itself: the device its ranks ran on must
/// be the system's GPU (an H100 log on the RTX PRO 6000 box fitted its link and latency and
/// was written as that box's calibration), and a run whose check found wrong values (a
/// row's `#wrong`, or the `Out of bounds values : N FAILED` summary) is refused with its
/// line. The file as measured, and the same log on an H100 system, run.
#[test]
fn nccl_output_of_another_gpu_or_a_failed_check_is_refused() {
    let text = std::fs::read_to_string(fixture("nccl_all_reduce_8gpu.log")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, t: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, t).unwrap();
        p.to_str().unwrap().to_string()
    };
    let h100 = write(
        "h100.log",
        text.replace(
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
            "NVIDIA H100 80GB HBM3",
        ),
    );
    for cmd in ["validate", "calibrate"] {
        let e = common::failure_of(&[cmd, "--measured", &h100]);
        assert!(
            e.contains("h100.log:6")
                && e.contains("\"NVIDIA H100 80GB HBM3\"")
                && e.contains("GPU h100-pcie or h100-sxm")
                && e.contains("the system's GPU is rtx-pro-6000"),
            "{cmd}: {e}"
        );
    }
    common::stdout_of(&[
        "validate",
        "--measured",
        &h100,
        "--system",
        "8x-h100-nvlink",
    ]);
    let summary = write(
        "summary.log",
        text.replace(
            "# Out of bounds values : 0 OK",
            "# Out of bounds values : 7 FAILED",
        ),
    );
    let e = common::failure_of(&["validate", "--measured", &summary]);
    assert!(
        e.contains("summary.log:44") && e.contains("7 wrong values"),
        "{e}"
    );
    // The 1,024-byte row's out-of-place #wrong (the 9th column) set to 5.
    let row: String = text
        .lines()
        .map(|l| {
            let mut c: Vec<&str> = l.split_whitespace().collect();
            if c.first() == Some(&"1024") && c.len() == 13 {
                c[8] = "5";
                c.join(" ")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let wrong = write("row.log", row);
    let e = common::failure_of(&["validate", "--measured", &wrong]);
    assert!(
        e.contains("row.log:25") && e.contains("#wrong = 5") && e.contains("1024 bytes"),
        "{e}"
    );
    common::stdout_of(&[
        "validate",
        "--measured",
        fixture("nccl_all_reduce_8gpu.log").to_str().unwrap(),
    ]);
}

#[test]
fn nccl_errors() {
    let e = error("nccl_bad_time.log", Some(19));
    assert!(e.contains("31.O6"), "{e}");
    let e = error("nccl_short_row.log", Some(20));
    assert!(e.contains("columns"), "{e}");
    let e = error("nccl_no_gpu_count.log", None);
    assert!(e.contains("give the GPU count"), "{e}");
    // With the count given, the same file reads.
    let opts = ReadOptions {
        gpus: Some(8),
        ..ReadOptions::default()
    };
    let set = read_file_with(&fixture("nccl_no_gpu_count.log"), &opts).unwrap();
    assert_eq!(set.observations.len(), 4);
}

#[test]
fn gemm_csv() {
    let set = read("gemm_decode.csv");
    let rows: Vec<(u64, u64, u64, String, f64)> = set
        .observations
        .iter()
        .filter_map(|o| match &o.quantity {
            Quantity::Gemm {
                m,
                n,
                k,
                dtype,
                seconds,
                ..
            } => Some((*m, *n, *k, dtype.clone(), *seconds)),
            _ => None,
        })
        .collect();
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[0].0..=rows[0].2, 1..=7168);
    assert_eq!(
        (rows[4].0, rows[4].1, rows[4].3.as_str()),
        (64, 4096, "fp8")
    );
    assert_relative_eq!(rows[4].4, 0.0118e-3);
    assert_eq!(set.observations[4].origin.line, Some(10));
}

#[test]
fn gemm_errors() {
    let e = error("gemm_missing_column.csv", None);
    assert!(e.contains("missing column `k`"), "{e}");
    let e = error("gemm_bad_value.csv", Some(5));
    assert!(e.contains("n/a"), "{e}");
}

#[test]
fn profiler_trace_shares() {
    let set = read("decode.pt.trace.json");
    let s = shares(&set);
    let want = [
        (TraceCategory::Allreduce, 0.4),
        (TraceCategory::Moe, 0.2),
        (TraceCategory::Attention, 0.1),
        (TraceCategory::Gemm, 0.15),
        (TraceCategory::Dequant, 0.05),
        (TraceCategory::Other, 0.1),
    ];
    assert_eq!(s.len(), want.len());
    for ((c, v), (wc, wv)) in s.iter().zip(want) {
        assert_eq!(*c, wc);
        assert_relative_eq!(*v, wv, max_relative = 1e-12);
    }
    let opts = ReadOptions {
        concurrency: Some(64),
        ..ReadOptions::default()
    };
    let set = read_file_with(&fixture("decode.pt.trace.json"), &opts).unwrap();
    assert!(set.observations.iter().all(|o| matches!(
        o.quantity,
        Quantity::CategoryShare {
            concurrency: 64,
            ..
        }
    )));
}

/// A trace whose all-reduce or MoE kernels the layout does not run was taken on another
/// model or layout: `validate`, `calibrate` and `explain` refuse it, naming the file, the
/// category and the layout, where they reported a -40-point error (all-reduce at TP 1) or
/// fitted a dense model to MoE kernels. The same trace on the layout it fits runs.
#[test]
fn a_trace_of_kernels_the_layout_does_not_run_is_refused() {
    let trace = fixture("decode.pt.trace.json");
    let trace = trace.to_str().unwrap();
    let dense = ["--model", "llama-3.1-8b", "--system", "8x-h100-nvlink"];
    for (cmd, tp, category) in [
        ("validate", "1", "allreduce"),
        ("calibrate", "1", "allreduce"),
        ("validate", "8", "moe"),
        ("explain", "8", "moe"),
    ] {
        let mut args = vec![cmd, "--measured", trace, "--tp", tp];
        args.extend(dense);
        let out = common::output_of(&args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd} --tp {tp}: {e}");
        assert!(
            e.contains("decode.pt.trace.json")
                && e.contains(&format!("{category} kernels, which llama-3.1-8b"))
                && e.contains(&format!("at tp{tp} does not run")),
            "{e}"
        );
    }
    common::stdout_of(&["validate", "--measured", trace]);
}

#[test]
fn trace_errors() {
    let e = error("trace_truncated.json", Some(264));
    assert!(e.contains("EOF"), "{e}");
}

#[test]
fn measurement_toml() {
    let set = read("measurement.toml");
    assert_eq!(set.system.as_deref(), Some("8x-rtx-pro-6000-pcie"));
    assert_tpots(&set, &[(8, Some(1024), 256, TpotDef::Itl, 16.1e-3)]);
    assert_eq!(set.throughputs(), vec![(8, 462.2)]);
    let s = shares(&set);
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].0, TraceCategory::Allreduce);
    assert_relative_eq!(s[0].1, 0.4);
    // Each observation has the line of its point's `[[points]]` header.
    let lines: Vec<_> = set.observations.iter().map(|o| o.origin.line).collect();
    assert_eq!(lines.first(), Some(&Some(8)), "{lines:?}");
    assert_eq!(lines.last(), Some(&Some(16)), "{lines:?}");
}

#[test]
fn toml_errors() {
    let e = error("measurement_unknown_key.toml", Some(11));
    assert!(e.contains("tpot_ms"), "{e}");
}

#[test]
fn team_measurement_file_transcribes_the_record() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("configs/measured/k25b6000bench1.toml");
    let set = read_file(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(set.system.as_deref(), Some("8x-rtx-pro-6000-pcie"));
    assert_eq!(set.model.as_deref(), Some("kimi-k2.5-int4"));
    let t = tpots(&set);
    assert_eq!(t.len(), 3);
    for (got, total) in t.iter().zip([0.407, 0.414, 0.398]) {
        assert_eq!((got.0, got.1, got.2, got.3), (1, None, 32, TpotDef::E2e));
        assert_relative_eq!(got.4, total / 32.0, max_relative = 1e-12);
    }
    // "Plateaus at ~1,536 tok/s at C = 128 and doesn't improve beyond": the same rate at the
    // next doubling.
    assert_eq!(set.throughputs(), vec![(128, 1536.0), (256, 1536.0)]);
    assert!(set.observations.iter().any(|o| matches!(
        o.quantity,
        Quantity::Throughput {
            concurrency: 128,
            input_len: None,
            output_len: None,
            ..
        }
    )));
    assert_eq!(shares(&set), vec![(TraceCategory::Allreduce, 0.515)]);

    // The same TPOTs as the team's log read directly.
    let log = read("k25b6000bench1_macro.log");
    for (a, b) in tpots(&set).iter().zip(tpots(&log)) {
        assert_relative_eq!(a.4, b.4, max_relative = 1e-12);
    }
}

#[test]
fn every_builtin_measurement_reads() {
    let names = builtin_names(Kind::Measured);
    assert!(names.contains(&"k25b6000bench1"), "{names:?}");
    for n in names {
        let text = builtin_text(Kind::Measured, n).unwrap();
        rooftop::measured::parse_toml(text, n).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn read_files_merges_in_order() {
    let set = read_files(&[fixture("k25b6000bench1_macro.log"), fixture("vllm_c8.json")]).unwrap();
    assert_eq!(set.model.as_deref(), Some("/shared/kimi-k2.5-int4"));
    assert_eq!(set.observations.len(), 3 + 3);
    let files: Vec<&Observation> = set.observations.iter().collect();
    assert!(files[0].origin.file.ends_with("k25b6000bench1_macro.log"));
    assert!(files[5].origin.file.ends_with("vllm_c8.json"));
    let e = read_files(&[fixture("vllm_c8.json"), fixture("no_such_file.log")]).unwrap_err();
    assert!(e.to_string().contains("no_such_file.log"), "{e}");
}

/// No reader panics on a file cut at any point, or read as the wrong format.
#[test]
fn no_reader_panics_on_any_prefix_of_any_fixture() {
    use rooftop::measured::{answer_problem, parse_text, FileFormat};
    let formats = [
        FileFormat::MacroLog,
        FileFormat::VllmJson,
        FileFormat::Nccl,
        FileFormat::GemmCsv,
        FileFormat::Trace,
        FileFormat::Toml,
    ];
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/measured");
    let opts = ReadOptions::default();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        // Every prefix in its own format (ends included), and the whole text in every format.
        let own = rooftop::measured::FileFormat::detect(&path, &text);
        for (at, _) in text.char_indices().chain([(text.len(), ' ')]) {
            if let Some(f) = own {
                let answer = parse_text(&text[..at], "cut.file", f, &opts);
                let problem = answer_problem(&answer, "cut.file");
                assert!(
                    problem.is_none(),
                    "{} cut at {at}: {problem:?}",
                    path.display()
                );
            }
        }
        for f in formats {
            let answer = parse_text(&text, "whole.file", f, &opts);
            let problem = answer_problem(&answer, "whole.file");
            assert!(
                problem.is_none(),
                "{} as {f:?}: {problem:?}",
                path.display()
            );
        }
    }
}

mod fuzz {
    use proptest::prelude::*;
    use rooftop::measured::{parse_text, FileFormat, ReadOptions};

    proptest! {
        #[test]
        fn no_reader_panics_on_arbitrary_text(
            text in "(\\PC|[\\n\\t #,:=\\[\\]{}\"])*",
            format in 0usize..6,
        ) {
            let formats = [
                FileFormat::MacroLog,
                FileFormat::VllmJson,
                FileFormat::Nccl,
                FileFormat::GemmCsv,
                FileFormat::Trace,
                FileFormat::Toml,
            ];
            let answer = parse_text(&text, "fuzz.file", formats[format], &ReadOptions::default());
            let problem = rooftop::measured::answer_problem(&answer, "fuzz.file");
            prop_assert!(problem.is_none(), "{:?}: {:?}", text, problem);
        }

        #[test]
        fn no_reader_panics_on_line_shaped_text(
            lines in proptest::collection::vec(
                "(  Trial [0-9]{1,3}: [0-9.]{0,6}s?, [0-9]{0,3} tokens?, TPOT=[0-9.]*ms|#  Rank +[0-9]+ device [0-9]|[ 0-9.a-z-]{0,80}|[mnkdtype_slaticu,0-9.]{0,40}|Concurrency [0-9]*: [0-9.]* tok/s)",
                0..12,
            ),
            format in 0usize..6,
        ) {
            let formats = [
                FileFormat::MacroLog,
                FileFormat::VllmJson,
                FileFormat::Nccl,
                FileFormat::GemmCsv,
                FileFormat::Trace,
                FileFormat::Toml,
            ];
            let text = lines.join("\n");
            let answer = parse_text(&text, "lines.file", formats[format], &ReadOptions::default());
            let problem = rooftop::measured::answer_problem(&answer, "lines.file");
            prop_assert!(problem.is_none(), "{:?}: {:?}", text, problem);
        }
    }
}
