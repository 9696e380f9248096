//! Every built-in description loads and validates.
use rooftop::spec::registry::{builtin_names, load_gpu, load_interconnect, load_model, Kind};
use rooftop::spec::System;

#[test]
fn every_builtin_loads() {
    for n in builtin_names(Kind::Gpu) {
        load_gpu(n).unwrap_or_else(|e| panic!("{e}"));
    }
    for n in builtin_names(Kind::Interconnect) {
        load_interconnect(n).unwrap_or_else(|e| panic!("{e}"));
    }
    for n in builtin_names(Kind::System) {
        System::load(n).unwrap_or_else(|e| panic!("{e}"));
    }
    for n in builtin_names(Kind::Model) {
        load_model(n).unwrap_or_else(|e| panic!("{e}"));
    }
}
