#![no_main]
//! libFuzzer target: the gemm csv reader on arbitrary text.

use libfuzzer_sys::fuzz_target;
use rooftop::measured::{parse_text, FileFormat, ReadOptions};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let opts = ReadOptions {
        format: Some(FileFormat::GemmCsv),
        gpus: None,
        concurrency: None,
    };
    match parse_text(&text, common::LABEL, FileFormat::GemmCsv, &opts) {
        Err(e) => common::check_error(&e, &text),
        Ok(set) => common::check_measured(&set),
    }
});
