#![no_main]
//! libFuzzer target: Hugging Face config.json import; a success validates, reads back from its
//! TOML to the same model, and evaluates.

use libfuzzer_sys::fuzz_target;
use rooftop::spec::ModelSpec;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match rooftop::import_hf::import(&text, common::LABEL, None, Some("fuzz")) {
        Err(e) => assert!(e.to_string().starts_with(common::LABEL), "{e}"),
        Ok(imp) => {
            assert!(imp.model.validate().is_ok());
            let back: ModelSpec = rooftop::spec::registry::parse_toml(&imp.toml, "back").unwrap();
            assert_eq!(back, imp.model);
            common::evaluate(&imp.model, common::h200());
        }
    }
});
