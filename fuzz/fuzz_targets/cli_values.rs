#![no_main]
//! libFuzzer target: the CLI's own value parsers (ranges and lists, layouts, durations,
//! systems with overrides, counts). The same contract as `cli_value_parsers` in
//! `tests/fuzz_readers.rs`: no panic, bounded expansion, values within their flag's range.

use libfuzzer_sys::fuzz_target;
use rooftop::options::{
    parse_values, positive_u32, DraftLengths, Duration, Positive, Systems, MAX_VALUES,
};

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Ok(v) = parse_values(&s) {
        assert!(!v.is_empty() && v.len() as u64 <= MAX_VALUES, "{s:?}");
    }
    if let Ok(v) = s.parse::<Positive>() {
        assert!(v.0.iter().all(|x| *x >= 1), "{s:?}");
    }
    if let Ok(v) = s.parse::<DraftLengths>() {
        assert!(v.0.iter().all(|k| (1..=64).contains(k)), "{s:?}");
    }
    if let Ok(p) = s.parse::<rooftop::cost::Parallel>() {
        assert!(p.tp >= 1 && p.ep >= 1 && p.pp >= 1 && p.dp >= 1, "{s:?}");
    }
    if let Ok(d) = s.parse::<Duration>() {
        assert!(d.0 .0.is_finite() && d.0 .0 > 0.0, "{s:?}");
    }
    if let Ok(v) = positive_u32(&s) {
        assert!(v >= 1);
    }
    if let Ok(sys) = s.parse::<Systems>() {
        for v in &sys.0 {
            let _ = rooftop::whatif::load_variant(v, &[]);
        }
    }
});
