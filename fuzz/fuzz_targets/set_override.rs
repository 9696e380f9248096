#![no_main]
//! libFuzzer target: `--set` overrides (one per line) through the command's loading path.

use libfuzzer_sys::fuzz_target;
use rooftop::cli::ScenarioArgs;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let sets: Vec<String> = text.lines().take(4).map(str::to_string).collect();
    let args = ScenarioArgs {
        model: "llama-3.1-8b".into(),
        system: "8x-h200-nvlink".into(),
        tp: None,
        ep: None,
        pp: None,
        dp: None,
        calibration: None,
        set: sets,
    };
    if let Ok(l) = rooftop::commands::load(&args) {
        common::evaluate(&l.model, &l.system);
    }
});
