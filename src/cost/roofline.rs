//! The roofline as a pure function.
//!
//! `t = max(flops / (peak × η_compute), bytes / (bw × η_mem))`: an operator takes as long as
//! its slower side, and that side is what bounds it. Fixed costs (kernel gaps, launch) are
//! added by the caller so the bound stays a statement about the hardware.

use serde::Serialize;

/// Which resource bounds an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// Memory traffic dominates: faster DRAM would help.
    Memory,
    /// Arithmetic dominates: more FLOP/s would help.
    Compute,
    /// A fixed latency dominates (collectives' hop latency, launch gaps).
    Latency,
    /// Link bandwidth dominates (collectives with large messages).
    Link,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::Memory => "memory",
            Bound::Compute => "compute",
            Bound::Latency => "latency",
            Bound::Link => "link",
        }
    }
}

/// Time (seconds) and bound of an operator with `flops` work and `bytes` traffic on a device
/// that attains `flops_per_s` and `bytes_per_s` (both already multiplied by efficiencies).
#[inline]
pub fn roofline(flops: f64, bytes: f64, flops_per_s: f64, bytes_per_s: f64) -> (f64, Bound) {
    let tc = if flops > 0.0 {
        flops / flops_per_s
    } else {
        0.0
    };
    let tm = if bytes > 0.0 {
        bytes / bytes_per_s
    } else {
        0.0
    };
    if tc > tm {
        (tc, Bound::Compute)
    } else {
        (tm, Bound::Memory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_slower_side() {
        // 1 GFLOP at 1 TFLOP/s = 1 ms; 1 MB at 1 GB/s = 1 ms + epsilon
        let (t, b) = roofline(1e9, 1.1e6, 1e12, 1e9);
        assert!((t - 1.1e-3).abs() < 1e-12);
        assert_eq!(b, Bound::Memory);
        let (t, b) = roofline(2e9, 1e6, 1e12, 1e9);
        assert!((t - 2e-3).abs() < 1e-12);
        assert_eq!(b, Bound::Compute);
    }
}
