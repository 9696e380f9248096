//! Checks shared by the libFuzzer targets: the same contract as `tests/fuzz_readers.rs`, in
//! panics (libFuzzer reports a panic as a crash and saves the input).

#![allow(dead_code)]

use rooftop::cost::{CostParams, Evaluator, Parallel, Pass};
use rooftop::error::Error;
use rooftop::measured::{MeasuredSet, Quantity, MIN_MEASURED_SECONDS};
use rooftop::predict::{predict, Scenario};
use rooftop::spec::{ModelSpec, System};
use std::sync::OnceLock;

pub const LABEL: &str = "fuzz-input";

/// An error names the file; a line, when given, is one of the text's.
pub fn check_error(e: &Error, text: &str) {
    let msg = e.to_string();
    assert!(
        msg.starts_with(LABEL),
        "error without the file label: {msg}"
    );
    let lines = text.lines().count().max(1);
    if let Error::Invalid { line: Some(l), .. } | Error::Measured { line: Some(l), .. } = e {
        assert!(*l >= 1 && *l <= lines + 1, "line {l} of {lines}: {msg}");
    }
}

pub fn check_measured(set: &MeasuredSet) {
    assert!(!set.observations.is_empty());
    for o in &set.observations {
        let q = format!("{:?}", o.quantity);
        let time = |s: f64| assert!(s.is_finite() && s >= MIN_MEASURED_SECONDS, "{q}");
        match &o.quantity {
            Quantity::Tpot {
                concurrency,
                output_len,
                seconds,
                ..
            } => {
                assert!(*concurrency >= 1 && *output_len >= 1, "{q}");
                time(*seconds);
            }
            Quantity::Ttft {
                concurrency,
                seconds,
                ..
            } => {
                assert!(*concurrency >= 1, "{q}");
                time(*seconds);
            }
            Quantity::Throughput {
                concurrency,
                tokens_per_second,
                ..
            } => {
                assert!(*concurrency >= 1, "{q}");
                assert!(
                    tokens_per_second.is_finite() && *tokens_per_second > 0.0,
                    "{q}"
                );
            }
            Quantity::CategoryShare { share, .. } => assert!((0.0..=1.0).contains(share), "{q}"),
            Quantity::AllReduce {
                bytes,
                gpus,
                seconds,
            } => {
                assert!(bytes.is_finite() && *bytes >= 0.0 && *gpus >= 1, "{q}");
                time(*seconds);
            }
            Quantity::Gemm {
                m, n, k, seconds, ..
            } => {
                assert!(*m >= 1 && *n >= 1 && *k >= 1, "{q}");
                time(*seconds);
            }
        }
    }
}

pub fn h200() -> &'static System {
    static S: OnceLock<System> = OnceLock::new();
    S.get_or_init(|| System::load("8x-h200-nvlink").unwrap())
}

pub fn llama8b() -> &'static ModelSpec {
    static M: OnceLock<ModelSpec> = OnceLock::new();
    M.get_or_init(|| rooftop::spec::registry::load_model("llama-3.1-8b").unwrap())
}

/// Every number of a serialised record is finite (serde_json writes NaN/inf as null).
pub fn check_json(v: &serde_json::Value, path: &str) {
    match v {
        serde_json::Value::Null => {
            let key = path.rsplit('.').next().unwrap_or(path);
            assert!(["window", "math"].contains(&key), "{path} is null");
        }
        serde_json::Value::Number(n) => assert!(n.as_f64().unwrap().is_finite(), "{path}"),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, x)| check_json(x, &format!("{path}[{i}]"))),
        serde_json::Value::Object(o) => o
            .iter()
            .for_each(|(k, x)| check_json(x, &format!("{path}.{k}"))),
        _ => {}
    }
}

/// A model on a system: decode, prefill and the predict record are finite and positive.
pub fn evaluate(m: &ModelSpec, s: &System) {
    let mut tp = s.spec.gpu_count.next_power_of_two().min(1 << 16);
    let par = loop {
        if tp == 0 {
            return;
        }
        if Parallel::tp(tp).validate(m, s).is_ok() {
            break Parallel::tp(tp);
        }
        tp /= 2;
    };
    for params in [CostParams::default_for(s), CostParams::speed_of_light()] {
        let ev = Evaluator::new(m, s, par, params).unwrap();
        for pass in [
            Pass::decode(1.0, 0.0),
            Pass::decode(64.0, 4096.0),
            Pass::prefill(1.0, 1024.0, 0.0),
        ] {
            let st = ev.evaluate(&pass);
            assert!(
                st.total.is_finite() && st.total > 0.0,
                "{pass:?}: {}",
                st.total
            );
            assert!(st.breakdown.0.iter().all(|x| x.is_finite() && *x >= 0.0));
        }
    }
    let sc = Scenario::new(m, s, par).unwrap();
    check_json(
        &serde_json::to_value(predict(&sc, 8, 1024).unwrap()).unwrap(),
        "predict",
    );
}
