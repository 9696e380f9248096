//! `calibrate --holdout`: each deployment fitted on a few of its runs, the rest predicted
//! with 95 % intervals that must cover what they claim.

use rooftop::holdout::evaluate;
use rooftop::measured::e2e_csv::{parse_e2e_csv, E2eRun};
use std::collections::BTreeSet;

/// vLLM's Llama-3.1-70B runs of the dev file: nine dense deployments (B200 and H100, FP8
/// and NVFP4, TP 1 to 8) of 15 runs each, quick to fit.
fn llama_runs() -> Vec<E2eRun> {
    let path = "tests/data/dev/e2e_serving.csv";
    let text = std::fs::read_to_string(path).unwrap();
    parse_e2e_csv(&text, path)
        .unwrap()
        .into_iter()
        .filter(|r| r.backend == "vllm" && r.model_path == "meta-llama/Llama-3.1-70B")
        .collect()
}

#[test]
fn held_out_intervals_cover_near_their_95_percent_and_the_split_is_honest() {
    let runs = llama_runs();
    let r = evaluate(&runs, "dev", &[], None, 3, 0, &|_, _| {}).unwrap();
    assert!(
        r.deployments.len() >= 8,
        "{} deployments",
        r.deployments.len()
    );
    let mut held = 0;
    for d in &r.deployments {
        // Three runs fitted, the rest held out, none in both, all of the deployment's.
        assert_eq!(d.fitted_lines.len(), 3);
        let fitted: BTreeSet<usize> = d.fitted_lines.iter().copied().collect();
        assert_eq!(fitted.len(), 3);
        for h in &d.held_out {
            assert!(
                !fitted.contains(&h.line),
                "line {} fitted and held out",
                h.line
            );
            let [lo, hi] = h.tpot_ci95_ms;
            assert!(lo > 0.0 && lo <= h.calibrated_tpot_ms && h.calibrated_tpot_ms <= hi);
            assert_eq!(
                h.covered,
                lo <= h.measured_tpot_ms && h.measured_tpot_ms <= hi
            );
        }
        held += d.held_out.len();
        assert!(d.loo_rms_error.is_some(), "three points leave one out");
    }
    assert_eq!(held, r.held_out_runs);
    assert_eq!(held + 3 * r.deployments.len(), runs.len());
    // A 95 % interval that covers far less is over-confident (the parameters' spread alone
    // covered about two thirds); one that covers everything says nothing.
    assert!(
        (0.85..=1.0).contains(&r.coverage),
        "coverage {:.3} of {} held-out runs",
        r.coverage,
        r.held_out_runs
    );
    // Fitting helps the runs it did not see.
    let med = |f: fn(&rooftop::holdout::DeploymentCoverage) -> f64| {
        let mut v: Vec<f64> = r.deployments.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    assert!(med(|d| d.calibrated_median_abs_error) <= med(|d| d.default_median_abs_error));
}

#[test]
fn the_same_seed_draws_the_same_split_and_another_seed_another() {
    let runs: Vec<E2eRun> = llama_runs()
        .into_iter()
        .filter(|r| r.system == "b200" && r.tp == 8 && r.precision == "fp8")
        .collect();
    let lines = |seed| {
        let r = evaluate(&runs, "dev", &[], None, 3, seed, &|_, _| {}).unwrap();
        r.deployments[0].fitted_lines.clone()
    };
    assert_eq!(lines(0), lines(0));
    assert_ne!(lines(0), lines(1));
}

#[test]
fn deployments_too_small_to_hold_out_are_counted_not_fitted() {
    let all = llama_runs();
    let of = |tp: u32| {
        all.iter()
            .filter(move |r| r.system == "b200" && r.precision == "fp8" && r.tp == tp)
            .cloned()
    };
    // Every run of one deployment and 5 of another: with 5 to fit on, only the first is
    // checked.
    let runs: Vec<E2eRun> = of(8).chain(of(4).take(5)).collect();
    let r = evaluate(&runs, "dev", &[], None, 5, 0, &|_, _| {}).unwrap();
    let checked: usize = r
        .deployments
        .iter()
        .map(|d| d.held_out.len() + d.fitted_lines.len())
        .sum();
    let skipped: usize = r.skipped.iter().map(|s| s.1).sum();
    assert_eq!(checked + skipped, runs.len());
    assert!(r
        .skipped
        .iter()
        .any(|s| s.0.contains("no more than 5 runs")));
    // Nothing held out anywhere is an error, not a report of NaN coverage.
    let e = evaluate(&runs[..2], "dev", &[], None, 3, 0, &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("nothing is held out"), "{e}");
}

#[test]
fn holdout_refuses_what_it_cannot_read() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rooftop"))
        .args([
            "calibrate",
            "--measured",
            "tests/data/dev/gemm_h100-sxm.csv",
            "--holdout",
            "3",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("e2e serving CSV"), "{err}");
}

/// A run written twice in the file is one measurement: its copy is set aside with the reason
/// before deployments are split, so no fitted run's twin is held out (it would predict
/// itself and inflate the coverage).
#[test]
fn a_repeated_run_never_sits_on_both_sides_of_the_split() {
    let mut runs = llama_runs();
    let n = runs.len();
    let mut copies: Vec<E2eRun> = runs.clone();
    for (i, c) in copies.iter_mut().enumerate() {
        c.line = 100_000 + i;
    }
    runs.extend(copies);
    let r = evaluate(&runs, "dev", &[], None, 3, 0, &|_, _| {}).unwrap();
    let repeats = r
        .skipped
        .iter()
        .find(|(why, _)| why.contains("field for field"))
        .map(|(_, k)| *k)
        .expect("the copies are listed with their reason");
    assert!(repeats >= n, "{repeats} of {n} copies set aside");
    for d in &r.deployments {
        for line in d
            .fitted_lines
            .iter()
            .chain(d.held_out.iter().map(|h| &h.line))
        {
            assert!(
                *line < 100_000,
                "copy at line {line} was fitted or held out"
            );
        }
    }
}
