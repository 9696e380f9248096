//! Calibration: on the team's data it predicts each held-out trial with physical parameters
//! and never beats the hardware bound; on synthetic data from known parameters it recovers
//! them; the calibration file round-trips and bad files are refused.

mod common;

use rooftop::calibrate::{calibrate, predict_observation, Assumptions, Calibration, ParamKind};
use rooftop::cost::{CostParams, Parallel};
use rooftop::measured::{self, MeasuredSet, Observation, Origin, Quantity, TpotDef};
use rooftop::predict::Scenario;
use rooftop::spec::registry::{builtin_text, load_model, Kind};
use rooftop::spec::{ModelSpec, System};

fn team() -> (ModelSpec, System, MeasuredSet) {
    let text = builtin_text(Kind::Measured, "k25b6000bench1").unwrap();
    let set = measured::parse_text(
        text,
        "k25b6000bench1.toml",
        measured::FileFormat::Toml,
        &Default::default(),
    )
    .unwrap();
    (
        load_model("kimi-k2.5-int4").unwrap(),
        System::load("8x-rtx-pro-6000-pcie").unwrap(),
        set,
    )
}

#[test]
fn team_trials_are_predicted_held_out_with_physical_parameters() {
    let (m, s, set) = team();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let a = Assumptions::default();
    let c = calibrate(&sc, &set, a, vec![]).unwrap();
    let p = c.params(&CostParams::default_for(&s));
    let sol = CostParams::speed_of_light();
    let mut tpots = (0.0, 0.0, 0);
    for o in &set.observations {
        let pred = predict_observation(&sc, &p, o, &a).unwrap();
        let bound = predict_observation(&sc, &sol, o, &a).unwrap();
        match o.quantity {
            Quantity::Tpot {
                seconds,
                definition,
                ..
            } => {
                assert_eq!(definition, TpotDef::E2e);
                tpots = (tpots.0 + seconds, tpots.1 + pred, tpots.2 + 1);
                // The hardware bound is never above a measured or calibrated time.
                assert!(bound <= seconds && bound <= pred);
                assert!(
                    o.origin.prose.is_none(),
                    "the log's trials are measurements"
                );
            }
            Quantity::Throughput {
                tokens_per_second, ..
            } => {
                // Both throughput points are the record's sentence, not a benchmark's output.
                assert!(o.origin.prose.is_some(), "{o:?}");
                assert!(
                    bound >= tokens_per_second && bound >= pred,
                    "SOL throughput {bound} below a measured/calibrated one"
                );
            }
            _ => {}
        }
    }
    assert_eq!(tpots.2, 3);
    // Held out: each single-stream trial predicted by a fit that never saw it (the other two
    // trials, the throughput sentences and the share). The fitted points themselves are
    // not checked: nine parameters on six points reproduce them whatever the physics.
    let trials: Vec<_> = c
        .residuals
        .iter()
        .filter(|r| r.point.starts_with("tpot"))
        .collect();
    assert_eq!(trials.len(), 3);
    for r in &trials {
        let loo = r
            .loo_prediction
            .expect("leave-one-out is run on the team's data");
        assert!(
            (loo - r.measured).abs() / r.measured < 0.05,
            "trial {} ms predicted {loo} ms without it",
            r.measured
        );
    }
    // Something no point gives: the decode step alone (no prefill in it) is faster than the
    // measured end-to-end time per token, which spreads the prefill over 32 tokens.
    let step = rooftop::predict::predict(&sc.with_params(p), 1, 32).unwrap();
    assert!(
        step.tpot_ms < tpots.0 / 3.0 * 1e3,
        "decode step {} ms vs e2e {} ms",
        step.tpot_ms,
        tpots.0 / 3.0 * 1e3
    );
    for f in &c.parameters {
        assert!(
            f.value >= f.lower_bound && f.value <= f.upper_bound,
            "{} = {}",
            f.name,
            f.value
        );
        assert!(
            f.ci95_low <= f.value && f.value <= f.ci95_high && f.stderr.is_finite(),
            "{}",
            f.name
        );
    }
    // Efficiencies stay fractions, fixed costs non-negative: physically plausible.
    let get = |k: ParamKind| c.parameters.iter().find(|f| f.kind == k).unwrap().value;
    assert!(get(ParamKind::MemoryEfficiency) <= 1.0 && get(ParamKind::MemoryEfficiency) > 0.3);
    assert!(get(ParamKind::KernelGap) >= 0.0);
    // Every serving mechanism is scored beside the GPU loop alone, and the residuals say
    // which points are prose.
    let l = c.serving_limit.as_ref().unwrap();
    let names: Vec<&str> = l.candidates.iter().map(|m| m.mechanism.as_str()).collect();
    assert!(names.contains(&"in-flight cap") && names.contains(&"time per streamed token"));
    let prose = c.residuals.iter().filter(|r| r.prose.is_some()).count();
    assert_eq!(prose, 3, "two throughput points and the all-reduce share");
}

#[test]
fn explain_ranks_the_mechanisms_against_the_priors_and_the_calibrated_gpu_loop() {
    let run = |format: &str| {
        let out = assert_cmd::Command::cargo_bin("rooftop")
            .unwrap()
            .args([
                "explain",
                "--measured",
                "k25b6000bench1",
                "--format",
                format,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run("text");
    assert!(
        text.contains("against the GPU loop at the priors parameters"),
        "{text}"
    );
    assert!(text.contains("against the GPU loop at the calibrated parameters"));
    assert!(text.contains("prose"), "prose points are named: {text}");
    let v: serde_json::Value = serde_json::from_str(&run("json")).unwrap();
    let bases = v["bases"].as_array().unwrap();
    assert_eq!(bases.len(), 2);
    assert_eq!(bases[0]["basis"], "priors");
    for b in bases {
        let ms = b["mechanisms"].as_array().unwrap();
        assert!(ms.len() >= 5);
        for (k, m) in ms.iter().enumerate() {
            assert_eq!(m["rank"].as_u64(), Some(k as u64 + 1));
            assert!(m["name"].is_string() && m["prior"].is_number());
            let p = m["plausibility"].as_str().unwrap();
            assert!(
                ["plausible", "possible", "implausible", "cannot hold it"].contains(&p),
                "{p}"
            );
            // A mechanism that cannot hold the plateau says why.
            if p == "cannot hold it" {
                assert!(m["note"].is_string(), "{m}");
            }
        }
    }
    assert!(v["points"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["read_from"] == "prose" && p["quote"].is_string()));
    let csv = run("csv");
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("basis,rank,mechanism,needed"));
    assert!(lines.count() >= 10);
}

fn obs(q: Quantity) -> Observation {
    Observation {
        quantity: q,
        origin: Origin {
            file: "synthetic".into(),
            line: None,
            prose: None,
        },
    }
}

#[test]
fn known_parameters_are_recovered_from_synthetic_measurements() {
    let m = load_model("kimi-k2.5-int4").unwrap();
    let s = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let a = Assumptions {
        input_len: 256,
        output_len: 256,
        client: rooftop::serve::ClientModel::IDEAL,
    };
    let mut truth = CostParams::default_for(&s);
    truth.memory_efficiency = 0.62;
    truth.collective_latency_scale = 2.2;
    truth.kernel_gap = 1.5e-6;
    let mut set = MeasuredSet::default();
    for c in [1u32, 2, 4, 8, 16, 32, 64, 128] {
        let o = obs(Quantity::Tpot {
            concurrency: c,
            input_len: Some(256),
            output_len: 256,
            definition: TpotDef::Itl,
            seconds: 0.0,
        });
        let v = predict_observation(&sc, &truth, &o, &a).unwrap();
        set.observations.push(obs(Quantity::Tpot {
            concurrency: c,
            input_len: Some(256),
            output_len: 256,
            definition: TpotDef::Itl,
            seconds: v,
        }));
    }
    for bytes in [16e3, 256e3, 4e6, 64e6] {
        let o = obs(Quantity::AllReduce {
            bytes,
            gpus: 8,
            seconds: 0.0,
        });
        let v = predict_observation(&sc, &truth, &o, &a).unwrap();
        set.observations.push(obs(Quantity::AllReduce {
            bytes,
            gpus: 8,
            seconds: v,
        }));
    }
    let c = calibrate(&sc, &set, a, vec![]).unwrap();
    for r in &c.residuals {
        assert!(r.error.abs() < 0.01, "{}: {:+.3}", r.point, r.error);
    }
    let get = |k: ParamKind| c.parameters.iter().find(|f| f.kind == k).unwrap().clone();
    for (k, want) in [
        (ParamKind::MemoryEfficiency, 0.62),
        (ParamKind::CollectiveLatencyScale, 2.2),
        (ParamKind::KernelGap, 1.5),
    ] {
        let f = get(k);
        assert!(
            (f.value - want).abs() / want < 0.05,
            "{}: fitted {} vs true {want}",
            f.name,
            f.value
        );
        assert!(f.informed_by_data);
    }
    assert!(c.loo_rms_error.unwrap() < 0.02);
}

/// The team's measurement calibrated, and a folder holding it as `cal.toml`.
fn team_calibration_file() -> (Calibration, tempfile::TempDir) {
    let (m, s, set) = team();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let c = calibrate(&sc, &set, Assumptions::default(), vec!["k25".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cal.toml"), c.to_toml()).unwrap();
    (c, dir)
}

#[test]
fn calibration_file_round_trips_and_bad_files_are_refused() {
    let (c, dir) = team_calibration_file();
    let p = dir.path().join("cal.toml");
    let back = Calibration::load(p.to_str().unwrap()).unwrap();
    assert_eq!(back.parameters.len(), c.parameters.len());
    for (a, b) in back.parameters.iter().zip(&c.parameters) {
        assert_eq!(a.kind, b.kind);
        assert!((a.value - b.value).abs() <= 1e-12 * b.value.abs().max(1.0));
    }
    let bad = c.to_toml().replacen("value = ", "value = 7", 1);
    std::fs::write(&p, bad).unwrap();
    let e = Calibration::load(p.to_str().unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cal.toml") && e.contains("a value in"), "{e}");
    std::fs::write(&p, "model = \"x\"\n").unwrap();
    let e = Calibration::load(p.to_str().unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cal.toml") && e.contains("missing field"), "{e}");
}

#[test]
fn cli_calibrate_then_predict_with_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cal.toml");
    assert_cmd::Command::cargo_bin("rooftop")
        .unwrap()
        .args([
            "calibrate",
            "--measured",
            "k25b6000bench1",
            "--out",
            p.to_str().unwrap(),
        ])
        .assert()
        .success();
    let out = assert_cmd::Command::cargo_bin("rooftop")
        .unwrap()
        .args([
            "predict",
            "--calibration",
            p.to_str().unwrap(),
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["provenance"], "calibrated");
    let t = v["tpot_ms"].as_f64().unwrap();
    let ci = v["tpot_ci95_ms"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() <= t && t <= ci[1].as_f64().unwrap());
    assert!(v["sol_tpot_ms"].as_f64().unwrap() <= ci[0].as_f64().unwrap());
}

#[test]
fn default_run_validates_the_team_box() {
    let out = assert_cmd::Command::cargo_bin("rooftop")
        .unwrap()
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let s = String::from_utf8(out).unwrap();
    for needle in [
        "kimi-k2.5-int4 on 8x-rtx-pro-6000-pcie",
        "12.72 ms",
        "1536.00 tok/s",
        "51.50 %",
        "SOL",
        "calibrated",
        "95 % interval",
    ] {
        assert!(s.contains(needle), "default output lacks {needle}:\n{s}");
    }
}

#[test]
fn compare_uses_a_calibration_only_for_its_own_system() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cal.toml");
    assert_cmd::Command::cargo_bin("rooftop")
        .unwrap()
        .args(["calibrate", "--out", p.to_str().unwrap()])
        .assert()
        .success();
    let cal = p.to_str().unwrap();
    let compare = |model: &str| {
        common::json_of(&[
            "compare",
            "--model",
            model,
            "--calibration",
            cal,
            "--systems",
            "8x-rtx-pro-6000-pcie,8x-h200-nvlink",
            "--format",
            "json",
        ])
    };
    let v = compare("kimi-k2.5-int4");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows[0]["provenance"], "calibrated");
    assert_eq!(rows[1]["provenance"], "default");
    // Another model on the system it was fitted on: that row carries predict's refusal and
    // no numbers (it was applied and labelled calibrated); the other system's row runs.
    let v = compare("qwen3-30b-a3b");
    let rows = v["rows"].as_array().unwrap();
    let why = rows[0]["error"]
        .as_str()
        .expect("the fitted system's row refused");
    assert!(why.contains("fitted on model kimi-k2.5-int4"), "{why}");
    assert_eq!(rows[0]["tpot_ms"], serde_json::json!([]));
    assert!(rows[1]["error"].is_null() && rows[1]["provenance"] == "default");
}

/// Records built on a calibrated scenario come complete: predict, sweep and specdec carry
/// their 95 % intervals from the calibration's covariance, around their own values; the same
/// records without a calibration carry none.
#[test]
fn records_built_on_a_calibrated_scenario_carry_their_intervals() {
    use rooftop::predict::predict;
    use rooftop::serve::{sweep, Workload};
    use rooftop::specdec::{specdec, Acceptance, Draft};
    let (m, s, set) = team();
    let plain = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let c = calibrate(&plain, &set, Assumptions::default(), vec![]).unwrap();
    let cal = plain.clone().calibrated(&c);
    let inside = |ci: Option<[f64; 2]>, v: f64| {
        let [lo, hi] = ci.expect("an interval");
        assert!(lo <= v && v <= hi && lo < hi, "{v} outside [{lo}, {hi}]");
    };
    let p = predict(&cal, 8, 1024).unwrap();
    assert_eq!(p.provenance, "calibrated");
    inside(p.tpot_ci95_ms, p.tpot_ms);
    assert!(predict(&plain, 8, 1024).unwrap().tpot_ci95_ms.is_none());
    let w = Workload {
        input_len: 32,
        output_len: 32,
        tpot_def: TpotDef::Itl,
        client: rooftop::serve::ClientModel::IDEAL,
    };
    for pt in sweep(&cal, &[1, 64], w).unwrap().points {
        inside(pt.tpot_ci95_ms, pt.tpot_ms);
        inside(pt.throughput_ci95_tok_s, pt.throughput_tok_s);
    }
    assert!(sweep(&plain, &[1], w).unwrap().points[0]
        .tpot_ci95_ms
        .is_none());
    let sd = specdec(
        &cal,
        &Draft::Eagle,
        &Acceptance(vec![0.7]),
        &[1, 2],
        &[1],
        1024,
    )
    .unwrap();
    for pt in &sd.points {
        inside(pt.tpot_ci95_ms, pt.tpot_ms);
    }
}

/// Throughput and TPOT at several concurrencies from known parameters with one serving
/// mechanism set (or none).
fn flat_curve(truth: &CostParams) -> (MeasuredSet, Assumptions) {
    let m = load_model("kimi-k2.5-int4").unwrap();
    let s = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let a = Assumptions::default();
    let mut set = MeasuredSet::default();
    for c in [1u32, 16, 32, 64, 128, 256] {
        let q = |v: f64| Quantity::Throughput {
            concurrency: c,
            input_len: None,
            output_len: None,
            tokens_per_second: v,
        };
        let v = predict_observation(&sc, truth, &obs(q(0.0)), &a).unwrap();
        set.observations.push(obs(q(v)));
        // TPOT beside throughput: a count cap holds TPOT flat past it, a rate cap (time per
        // streamed token) makes it grow with C. Throughput alone cannot tell them apart.
        let t = |v: f64| Quantity::Tpot {
            concurrency: c,
            input_len: None,
            output_len: 32,
            definition: TpotDef::Itl,
            seconds: v,
        };
        let v = predict_observation(&sc, truth, &obs(t(0.0)), &a).unwrap();
        set.observations.push(obs(t(v)));
    }
    (set, a)
}

#[test]
fn calibration_chooses_the_serving_mechanism_that_made_a_flat_curve() {
    let m = load_model("kimi-k2.5-int4").unwrap();
    let s = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let base = CostParams::default_for(&s);
    let chosen = |truth: CostParams| {
        let (set, a) = flat_curve(&truth);
        let c = calibrate(&sc, &set, a, vec![]).unwrap();
        let l = c.serving_limit.clone().expect("throughput at several C");
        for r in &c.residuals {
            assert!(r.error.abs() < 0.02, "{}: {:+.3}", r.point, r.error);
        }
        (c, l)
    };
    // A cap of 80 requests in flight: the curve is flat from 80 on.
    let (c, l) = chosen(CostParams {
        inflight_cap: Some(80.0),
        ..base
    });
    assert_eq!(l.chosen, "in-flight cap");
    let cap = c
        .parameters
        .iter()
        .find(|f| f.kind == ParamKind::InflightCap)
        .unwrap();
    assert!((cap.value - 80.0).abs() < 4.0, "cap {}", cap.value);
    assert!(cap.ci95_low <= 80.0 && 80.0 <= cap.ci95_high);
    // 1.5 ms per streamed token: at most ~670 tok/s, a rate cap rather than a count cap.
    let (c, l) = chosen(CostParams {
        api_per_token: Some(1500e-6),
        ..base
    });
    assert_eq!(l.chosen, "time per streamed token", "{l:?}");
    let t = c
        .parameters
        .iter()
        .find(|f| f.kind == ParamKind::ApiPerToken)
        .unwrap();
    assert!((t.value - 1500.0).abs() / 1500.0 < 0.05, "{} us", t.value);
    // The GPU loop alone: no mechanism is needed, and none is carried into the fit.
    let (c, l) = chosen(base);
    assert_eq!(l.chosen, "none", "{l:?}");
    assert!(c
        .parameters
        .iter()
        .all(|f| !matches!(f.kind, ParamKind::InflightCap | ParamKind::ApiPerToken)));
}

/// The team's calibration at TP8, the system's default parameters and the batch-1 TPOT at
/// 1,024 tokens of context as a function of the parameters, handed to `check`.
fn with_team_tpot(check: impl FnOnce(&Calibration, &CostParams, &dyn Fn(&CostParams) -> f64)) {
    let (m, s, set) = team();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let c = calibrate(&sc, &set, Assumptions::default(), vec![]).unwrap();
    let base = CostParams::default_for(&s);
    let tpot = |p: &CostParams| {
        rooftop::predict::predict(&sc.with_params(*p), 1, 1024)
            .unwrap()
            .tpot_ms
    };
    check(&c, &base, &tpot);
}

/// A time's interval never reaches zero, however wide the fit leaves it: it spreads
/// relatively (a TPOT interval of [-791, 846] ms was printed from a loose fit), and where
/// the fit is tight it is the familiar value ± 1.96 sd.
#[test]
fn a_time_interval_stays_positive_however_loose_the_fit() {
    with_team_tpot(|c, base, tpot| {
        let y0 = tpot(&c.params(base));
        let (lo, hi) = c.interval(base, tpot);
        assert!(lo < y0 && y0 < hi && lo > 0.0, "[{lo}, {hi}] around {y0}");
        // Tight: close to symmetric.
        assert!(
            ((hi - y0) - (y0 - lo)).abs() < 0.05 * (hi - lo),
            "[{lo}, {hi}] around {y0}"
        );
        let mut loose = c.clone();
        for row in loose.covariance.iter_mut() {
            for x in row.iter_mut() {
                *x *= 1e4;
            }
        }
        let (lo, hi) = loose.interval(base, tpot);
        assert!(lo > 0.0 && lo < y0 && hi > y0, "[{lo}, {hi}] around {y0}");
    });
}

#[test]
fn a_new_measurement_is_predicted_wider_than_the_parameters_alone_and_widens_with_the_unexplained_error(
) {
    with_team_tpot(|c, base, tpot| {
        let (plo, phi) = c.interval(base, tpot);
        let (lo, hi) = c.prediction_interval(base, "tpot", tpot);
        assert!(lo < plo && phi < hi, "[{lo}, {hi}] within [{plo}, {phi}]");
        // The team's three trials are reproduced within a few per cent held out, so the
        // unexplained error of a TPOT is theirs (and the noise), not the throughput sentences'.
        let sigma = c.unexplained_sigma("tpot");
        assert!(
            (rooftop::calibrate::SERVING_SIGMA..0.06).contains(&sigma),
            "{sigma}"
        );
        assert!(c.unexplained_sigma("throughput") > sigma);
        // Doubling every held-out miss doubles the model's error and widens the interval.
        let mut worse = c.clone();
        for r in worse.residuals.iter_mut() {
            if let Some(p) = r.loo_prediction.as_mut() {
                *p = r.measured + 2.0 * (*p - r.measured);
            }
        }
        let (wlo, whi) = worse.prediction_interval(base, "tpot", tpot);
        assert!(
            wlo < lo && hi < whi,
            "[{wlo}, {whi}] not wider than [{lo}, {hi}]"
        );
        // A fit that could not leave a point out (no leave-one-out): its own RMS error over
        // the points it fitted, with the noise; the noise alone, never less, where it fits
        // them exactly.
        let mut none = c.clone();
        none.loo_rms_error = None;
        for r in none.residuals.iter_mut() {
            r.loo_prediction = None;
        }
        let noise = rooftop::calibrate::SERVING_SIGMA;
        let own = (none.rms_error.powi(2) + noise * noise).sqrt();
        assert!((none.unexplained_sigma("tpot") - own).abs() < 1e-12);
        none.rms_error = 0.0;
        assert_eq!(none.unexplained_sigma("tpot"), noise);
    });
}

/// Measured TTFTs that carry a latency outside the engine loop give it back as
/// `request_latency_ms`, beside the engine's parameters: it lifts every TTFT by itself, takes
/// no engine step (the decode TPOT does not move), and is fitted only where TTFTs are
/// measured.
#[test]
fn a_latency_outside_the_engine_loop_is_fitted_from_measured_ttfts_only() {
    let m = load_model("llama-3.1-8b").unwrap();
    let s = System::load("8x-h100-nvlink").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(1)).unwrap();
    let a = Assumptions {
        input_len: 1024,
        output_len: 256,
        client: rooftop::serve::ClientModel::IDEAL,
    };
    let base = CostParams::default_for(&s);
    let mut truth = base;
    truth.request_latency = 0.150;
    let ttft = |c: u32, seconds: f64| {
        obs(Quantity::Ttft {
            concurrency: c,
            input_len: Some(1024),
            output_len: Some(256),
            seconds,
        })
    };
    let tpot = |c: u32, seconds: f64| {
        obs(Quantity::Tpot {
            concurrency: c,
            input_len: Some(1024),
            output_len: 256,
            definition: TpotDef::Itl,
            seconds,
        })
    };
    // The latency adds to the TTFT itself at one request, and leaves the step alone.
    let t0 = predict_observation(&sc, &base, &ttft(1, 0.0), &a).unwrap();
    let t1 = predict_observation(&sc, &truth, &ttft(1, 0.0), &a).unwrap();
    assert!((t1 - t0 - 0.150).abs() < 1e-9, "{t0} -> {t1}");
    let d0 = predict_observation(&sc, &base, &tpot(1, 0.0), &a).unwrap();
    let d1 = predict_observation(&sc, &truth, &tpot(1, 0.0), &a).unwrap();
    assert!((d1 - d0).abs() < 1e-12 * d0.max(1.0), "{d0} -> {d1}");
    let mut set = MeasuredSet::default();
    for c in [1u32, 4, 16, 64] {
        let v = predict_observation(&sc, &truth, &ttft(c, 0.0), &a).unwrap();
        set.observations.push(ttft(c, v));
        let v = predict_observation(&sc, &truth, &tpot(c, 0.0), &a).unwrap();
        set.observations.push(tpot(c, v));
    }
    let c = calibrate(&sc, &set, a, vec![]).unwrap();
    let f = c
        .parameters
        .iter()
        .find(|f| f.kind == ParamKind::RequestLatency)
        .expect("fitted where TTFTs are measured");
    assert!(f.informed_by_data, "{f:?}");
    assert!((f.value - 150.0).abs() < 15.0, "{} ms", f.value);
    assert!(f.ci95_low <= f.value && f.value <= f.ci95_high);
    for r in &c.residuals {
        assert!(r.error.abs() < 0.02, "{}: {:+.3}", r.point, r.error);
    }
    // Without a measured TTFT there is nothing to fit it from.
    set.observations
        .retain(|o| !matches!(o.quantity, Quantity::Ttft { .. }));
    let c = calibrate(&sc, &set, a, vec![]).unwrap();
    assert!(c
        .parameters
        .iter()
        .all(|f| f.kind != ParamKind::RequestLatency));
}

/// explain reads a measurement as calibrate does (its model and system, no rate beyond the
/// speed of light) and explains only a curve that stops growing: one still growing at its
/// largest concurrency, a lone point, or two rates at one concurrency are refused with why.
#[test]
fn explain_refuses_a_curve_with_no_plateau_and_an_impossible_rate() {
    let dir = tempfile::tempdir().unwrap();
    let head = "system = \"8x-rtx-pro-6000-pcie\"\nmodel = \"kimi-k2.5-int4\"\nsource = \"test\"\ntpot_definition = \"e2e\"\n";
    let point =
        |c: u32, t: &str| format!("[[points]]\nconcurrency = {c}\nthroughput = \"{t} tok/s\"\n");
    let explain = |name: &str, body: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("{head}{body}")).unwrap();
        let out = common::output_of(&["explain", "--measured", p.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), stderr)
    };
    for (name, body, says) in [
        (
            "grow.toml",
            point(16, "300") + &point(32, "500"),
            "still grows",
        ),
        ("one.toml", point(128, "300"), "one point"),
        (
            "dup.toml",
            point(16, "300") + &point(16, "500"),
            "two throughputs at C = 16",
        ),
        (
            "fast.toml",
            point(128, "1e7") + &point(256, "1e7"),
            "speed-of-light",
        ),
    ] {
        let (code, e) = explain(name, body);
        assert_eq!(code, Some(1), "{name}: {e}");
        assert!(e.contains(says), "{name}: {e}");
    }
    // A curve that flattens is explained from where it stops growing.
    let (code, e) = explain(
        "flat.toml",
        point(16, "300") + &point(32, "310") + &point(64, "312"),
    );
    assert_eq!(code, Some(0), "{e}");
}

/// A kernel table's file name says which GPU its rows measured (`gemm_h100-sxm.csv`), as
/// validate reads it: calibrate fits them on that GPU's box, and refuses a --system with
/// another GPU (before, they were fitted as the default system's RTX PRO 6000 efficiencies).
#[test]
fn calibrate_fits_a_kernel_table_on_the_gpu_its_name_gives() {
    let table = "tests/data/dev/gemm_h100-sxm.csv";
    let run = |extra: &[&str]| {
        let mut args = vec!["calibrate", "--measured", table];
        args.extend(extra);
        common::output_of(&args)
    };
    let out = run(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("on 8x-h100-nvlink"), "{stdout}");
    let out = run(&["--system", "8x-b200-nvlink"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("measured on system \"8x-h100-nvlink\""),
        "{stderr}"
    );
}

/// Intervals honest about a small or poor fit: two points fitted with a large error get
/// intervals that cover them (the fit's own RMS error stands for the model's where no
/// leave-one-out can be run), a misfit on many points leaves the parameters the data never
/// touched at their prior's spread (so the fit is written, not refused), and a hand-edited
/// residual that no fit produces is refused with its line.
#[test]
fn calibration_intervals_cover_small_fits_and_keep_silent_priors() {
    let dir = tempfile::tempdir().unwrap();
    let rooftop = common::output_of::<&str>;
    let two = dir.path().join("two.toml");
    std::fs::write(
        &two,
        "system = \"8x-rtx-pro-6000-pcie\"\nmodel = \"kimi-k2.5-int4\"\nsource = \"test\"\n\
         tpot_definition = \"e2e\"\n[[points]]\nconcurrency = 1\noutput_len = 32\n\
         tpot = \"12.72 ms\"\n[[points]]\nconcurrency = 8\noutput_len = 32\ntpot = \"20 ms\"\n",
    )
    .unwrap();
    let cal = dir.path().join("two_cal.toml");
    let (two_s, cal_s) = (two.to_str().unwrap(), cal.to_str().unwrap());
    assert!(rooftop(&["calibrate", "--measured", two_s, "--out", cal_s])
        .status
        .success());
    let out = rooftop(&[
        "validate",
        "--measured",
        two_s,
        "--calibration",
        cal_s,
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let points = v["rows"].as_array().expect("rows");
    for p in points {
        let m = p["measured"].as_f64().unwrap();
        let ci = p["calibrated_ci95"]
            .as_array()
            .unwrap_or_else(|| panic!("{p}"));
        let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
        assert!(lo <= m && m <= hi, "{m} outside [{lo}, {hi}]: {p}");
    }
    // A hand-edited measured value below zero is no fit's output.
    let text = std::fs::read_to_string(&cal).unwrap();
    let bad = dir.path().join("bad.toml");
    let edited = text.replacen("\nmeasured = ", "\nmeasured = -0.5 #", 1);
    assert_ne!(edited, text, "the calibration has a residual to edit");
    std::fs::write(&bad, edited).unwrap();
    let out = rooftop(&["predict", "--calibration", bad.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("residuals[1].measured") && e.contains("above zero"),
        "{e}"
    );
}

/// A fit that misses many points (150 BF16 GEMMs, some 15 % rms against their 5 % σ) widens
/// what the data informs,
/// not the parameters it never touched: those keep their prior's spread, and the fit is a
/// usable calibration (before, the misfit scaled them too, to a standard error of 4 on a
/// 0.05-1 range, and `--out` refused to write it).
#[test]
fn a_misfit_leaves_the_parameters_the_data_never_touched_at_their_prior() {
    let dir = tempfile::tempdir().unwrap();
    let table = std::fs::read_to_string("tests/data/dev/gemm_h100-sxm.csv").unwrap();
    let mut lines = table.lines();
    let mut bf16 = vec![lines.next().unwrap().to_string()];
    bf16.extend(
        lines
            .filter(|l| l.split(',').nth(3) == Some("bf16"))
            .map(String::from),
    );
    assert_eq!(bf16.len(), 151);
    let file = dir.path().join("gemm_bf16.csv");
    std::fs::write(&file, bf16.join("\n") + "\n").unwrap();
    let out_file = dir.path().join("cal.toml");
    let out = common::output_of(&[
        "calibrate",
        "--system",
        "8x-h100-nvlink",
        "--model",
        "llama-3.1-70b",
        "--measured",
        file.to_str().unwrap(),
        "--out",
        out_file.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c =
        Calibration::from_text(&std::fs::read_to_string(&out_file).unwrap(), "cal.toml").unwrap();
    assert!(c.rms_error > 0.1, "the fit misses: {}", c.rms_error);
    for p in c.parameters.iter().filter(|p| !p.informed_by_data) {
        let prior_sigma = p.kind.prior_sigma(p.prior);
        assert!(
            p.stderr <= prior_sigma * (1.0 + 1e-9),
            "{}: std err {} beyond its prior's {prior_sigma}",
            p.name,
            p.stderr
        );
    }
}

/// explain reads a given calibration as a third basis beside the priors and its own fit:
/// before, `--calibration` was accepted and ignored.
#[test]
fn explain_reads_a_given_calibration_as_a_third_basis() {
    let (_, dir) = team_calibration_file();
    let p = dir.path().join("cal.toml");
    let out = common::output_of(&[
        "explain",
        "--measured",
        "k25b6000bench1",
        "--calibration",
        p.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bases = v["bases"].as_array().unwrap();
    let names: Vec<&str> = bases.iter().map(|b| b["basis"].as_str().unwrap()).collect();
    assert_eq!(names, ["priors", "calibrated", "given-calibration"]);
    // The given file is this measurement's own fit: its GPU loop is the fit's.
    let loop_of = |i: usize| bases[i]["gpu_loop_tok_s"].as_f64().unwrap();
    assert!(
        (loop_of(2) / loop_of(1) - 1.0).abs() < 1e-6,
        "{} vs {}",
        loop_of(2),
        loop_of(1)
    );
    assert!(
        (loop_of(2) / loop_of(0) - 1.0).abs() > 1e-3,
        "differs from the priors"
    );
}

/// A calibrated sweep or specdec run carries its TPOT interval in every format, not JSON
/// alone: the text table gains a "95 % ms" column and the CSV two columns, equal to the JSON
/// interval; without a calibration the CSV columns are empty and the text has none.
#[test]
fn a_calibrated_tpot_interval_reaches_text_and_csv() {
    let cal = format!(
        "{}/tests/fixtures/calibration/kimi-k2.5-int4-8x-rtx-pro-6000-pcie.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    for cmd in ["sweep", "specdec"] {
        let args = [cmd, "--calibration", &cal, "--concurrency", "1,8"];
        let json = common::json_of(&[&args[..], &["--format", "json"]].concat());
        let text = common::stdout_of(&args);
        assert!(text.contains("95 % ms"), "{text}");
        let csv = common::stdout_of(&[&args[..], &["--format", "csv"]].concat());
        let mut lines = csv.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let (lo, hi) = (
            head.iter().position(|c| *c == "tpot_ci95_low_ms").unwrap(),
            head.iter().position(|c| *c == "tpot_ci95_high_ms").unwrap(),
        );
        let points = json["points"].as_array().unwrap();
        assert!(!points.is_empty());
        for (row, p) in lines.zip(points) {
            let f: Vec<&str> = row.split(',').collect();
            let ci = p["tpot_ci95_ms"].as_array().unwrap();
            for (col, want) in [(lo, &ci[0]), (hi, &ci[1])] {
                let got: f64 = f[col].parse().unwrap();
                assert!((got - want.as_f64().unwrap()).abs() < 1e-3, "{cmd}: {row}");
            }
            assert!(text.contains(&format!(
                "[{:.2}, {:.2}]",
                ci[0].as_f64().unwrap(),
                ci[1].as_f64().unwrap()
            )));
        }
        let plain = common::stdout_of(&[cmd, "--concurrency", "1", "--format", "csv"]);
        let mut l = plain.lines();
        let head: Vec<&str> = l.next().unwrap().split(',').collect();
        let at = head.iter().position(|c| *c == "tpot_ci95_low_ms").unwrap();
        assert_eq!(l.next().unwrap().split(',').nth(at), Some(""));
        assert!(!common::stdout_of(&[cmd, "--concurrency", "1"]).contains("95 % ms"));
    }
}

/// The speed of light of a TPOT is one figure whichever command prints it: the bound that
/// `validate` and `calibrate` hold a measured TPOT against is the `sol_tpot_ms` that
/// `sweep` reports at the same point, for both definitions of TPOT, and it is below the
/// predicted TPOT. (Within 0.1 %: validate's is taken at the batch its speed-of-light loop
/// decodes, sweep's at the predicted loop's, which differ by a fraction of a sequence.) A sweep at the speed of light spends no host time: its engine CPU, API
/// server and client terms are zero.
#[test]
fn a_tpots_bound_in_validate_is_the_one_sweep_reports() {
    let m = load_model("kimi-k2.5-int4").unwrap();
    let s = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let a = Assumptions::default();
    let sol = CostParams::speed_of_light();
    for definition in [TpotDef::Itl, TpotDef::E2e] {
        for c in [1u32, 8, 64] {
            let o = obs(Quantity::Tpot {
                concurrency: c,
                input_len: Some(512),
                output_len: 64,
                definition,
                seconds: 0.0,
            });
            let bound = predict_observation(&sc, &sol, &o, &a).unwrap();
            let w = rooftop::serve::Workload {
                input_len: 512,
                output_len: 64,
                tpot_def: definition,
                client: a.client,
            };
            let point = rooftop::serve::sweep(&sc, &[c], w).unwrap().points[0].clone();
            assert!(
                (bound * 1e3 - point.sol_tpot_ms).abs() <= 1e-3 * point.sol_tpot_ms,
                "{definition:?} C={c}: validate's bound {:.4} ms, sweep's {:.4} ms",
                bound * 1e3,
                point.sol_tpot_ms
            );
            assert!(point.sol_tpot_ms < point.tpot_ms);
            let at_sol = Scenario {
                params: sol,
                ..sc.clone()
            };
            let p = rooftop::serve::sweep(&at_sol, &[c], w).unwrap().points[0].clone();
            for host in ["engine_cpu", "token_stream"] {
                assert_eq!(
                    p.breakdown_ms.get(host).copied().unwrap_or(0.0),
                    0.0,
                    "{host}"
                );
            }
        }
    }
}

/// A GEMM micro-benchmark row is one call, priced the same way whether `validate` checks it
/// as a kernel table's row or `calibrate` fits it: the harness's repeats (weights that fit in
/// L2), the floor its kernel names and its fixed cost. Before, calibrate priced the bare
/// operator: it refused the L40S table (a call whose 12.6 MB of weights sit in L2 ran below
/// the DRAM-only "bound"), and on H100 it fitted a memory efficiency of 0.68 that took the
/// calibrated BF16 rows from 8.4 % to 15.7 % median error.
#[test]
fn calibrate_prices_a_gemm_row_as_validate_does() {
    use rooftop::kernel_check::check_table;
    use rooftop::measured::kernel_table::read_kernel_table;
    for (file, system) in [
        ("gemm_l40s.csv", "8x-l40s-pcie"),
        ("gemm_h100-sxm.csv", "8x-h100-nvlink"),
        ("gemm_b200.csv", "8x-b200-nvlink"),
    ] {
        let path = common::data(&format!("dev/{file}"));
        let table = read_kernel_table(&path).unwrap();
        let s = System::load(system).unwrap();
        let rows = check_table(&table, &s, None).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let set = measured::parse_text(
            &text,
            file,
            measured::FileFormat::GemmCsv,
            &Default::default(),
        )
        .unwrap();
        assert_eq!(set.observations.len(), rows.len(), "{file}");
        let m = load_model("llama-3.1-70b").unwrap();
        let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
        let a = Assumptions::default();
        for (p, name) in [
            (CostParams::default_for(&s), "default"),
            (CostParams::speed_of_light(), "sol"),
        ] {
            for (o, r) in set.observations.iter().zip(&rows) {
                let fit = predict_observation(&sc, &p, o, &a).unwrap() * 1e6;
                let check = if name == "sol" { r.sol } else { r.default };
                assert!(
                    (fit - check).abs() <= 1e-9 * check.max(1e-9),
                    "{}: calibrate {fit} us, validate {check} us at {name}",
                    r.origin
                );
            }
        }
        // The table calibrates (before, L40S's row 15 was refused as below its bound).
        let out = common::output_of(&[
            "calibrate",
            "--measured",
            path.to_str().unwrap(),
            "--system",
            system,
            "--model",
            "llama-3.1-70b",
        ]);
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// An nccl-tests all-reduce is NCCL's call alone, with its tuner free: calibrate prices it
/// as `validate` prices an NCCL table's row, not as the serving engine would all-reduce the
/// same bytes (vLLM's custom kernel on an NVSwitch box, which is several times faster on
/// small messages and would have pulled a fit's link efficiency and latency wrong).
#[test]
fn calibrate_prices_an_nccl_tests_all_reduce_as_nccl_alone() {
    use rooftop::kernel_check::check_table;
    use rooftop::measured::kernel_table::{read_kernel_table, CollectiveName, KernelShape};
    let path = common::data("dev/nccl_h100-sxm.csv");
    let table = read_kernel_table(&path).unwrap();
    let s = System::load("8x-h100-nvlink").unwrap();
    let rows = check_table(&table, &s, None).unwrap();
    let m = load_model("llama-3.1-70b").unwrap();
    let sc = Scenario::new(&m, &s, Parallel::tp(8)).unwrap();
    let a = Assumptions::default();
    let p = CostParams::default_for(&s);
    let mut checked = 0;
    for (row, r) in table.rows.iter().zip(&rows) {
        let KernelShape::Nccl {
            collective: CollectiveName::AllReduce,
            gpus,
            bytes,
        } = row.shape
        else {
            continue;
        };
        let o = obs(Quantity::AllReduce {
            bytes: bytes as f64,
            gpus,
            seconds: row.seconds,
        });
        let fit = predict_observation(&sc, &p, &o, &a).unwrap() * 1e6;
        assert!(
            (fit - r.default).abs() <= 1e-9 * r.default,
            "{}: calibrate {fit} us, validate {} us",
            r.origin,
            r.default
        );
        checked += 1;
    }
    assert!(checked >= 10, "{checked} all-reduce rows");
}
