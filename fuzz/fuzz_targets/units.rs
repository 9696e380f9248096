#![no_main]
//! libFuzzer target: unit strings, layouts and weight formats.

use libfuzzer_sys::fuzz_target;
use rooftop::units::{Bytes, BytesPerSec, FlopsPerSec, Hertz, Seconds};

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    for v in [
        Bytes::parse(&s).map(|x| x.0),
        Seconds::parse(&s).map(|x| x.0),
        BytesPerSec::parse(&s).map(|x| x.0),
        FlopsPerSec::parse(&s).map(|x| x.0),
        Hertz::parse(&s).map(|x| x.0),
    ]
    .into_iter()
    .flatten()
    {
        assert!(v.is_finite() && v >= 0.0, "{s:?} -> {v}");
    }
    let _ = s.parse::<rooftop::spec::WeightFormat>();
    if let Ok(p) = s.parse::<rooftop::cost::Parallel>() {
        assert!(p.tp >= 1 && p.ep >= 1 && p.pp >= 1 && p.dp >= 1);
    }
});
