#![no_main]
//! libFuzzer target: description TOML (first byte picks GPU, interconnect, system or model),
//! read, validated, and when valid evaluated with the built-in parts.

use libfuzzer_sys::fuzz_target;
use rooftop::spec::registry::parse_toml;
use rooftop::spec::{GpuSpec, InterconnectSpec, ModelSpec, SystemSpec};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let label = common::LABEL;
    match kind % 4 {
        0 => match parse_toml::<GpuSpec>(&text, label) {
            Err(e) => common::check_error(&e, &text),
            Ok(g) if g.validate().is_ok() => {
                let mut s = common::h200().clone();
                s.gpu = g;
                common::evaluate(common::llama8b(), &s);
            }
            Ok(_) => {}
        },
        1 => match parse_toml::<InterconnectSpec>(&text, label) {
            Err(e) => common::check_error(&e, &text),
            Ok(l) if l.validate().is_ok() => {
                let mut s = common::h200().clone();
                s.link = l;
                common::evaluate(common::llama8b(), &s);
            }
            Ok(_) => {}
        },
        2 => match parse_toml::<SystemSpec>(&text, label) {
            Err(e) => common::check_error(&e, &text),
            Ok(spec) if spec.validate().is_ok() => {
                let mut s = common::h200().clone();
                s.spec = spec;
                common::evaluate(common::llama8b(), &s);
            }
            Ok(_) => {}
        },
        _ => match parse_toml::<ModelSpec>(&text, label) {
            Err(e) => common::check_error(&e, &text),
            Ok(m) if m.validate().is_ok() => common::evaluate(&m, common::h200()),
            Ok(_) => {}
        },
    }
});
