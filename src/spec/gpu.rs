//! GPU descriptions: what one device can move and compute.
//!
//! A roofline needs two numbers per device and dtype: peak memory bandwidth and dense peak
//! tensor throughput. A dtype the GPU cannot run natively is absent from `dense_peak`, never
//! zero: asking for it is an error, not an extrapolation.

use crate::units::{Bytes, BytesPerSec, FlopsPerSec, Hertz, Watts};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Ceilings past which a description is a typo (a unit off by 10^3 or more), not a part:
/// far above any part made (188 SMs on the RTX PRO 6000, 256 CUs on the MI355X, 15 PFLOPS
/// dense FP4 on the B300), so a real future part passes and `"1e30 TFLOPS"` does not. The
/// bandwidth ceiling is [`BytesPerSec::PLAUSIBLE`], shared with links and NICs.
const MAX_SM_COUNT: u32 = 10_000;
/// 1 EFLOPS.
const MAX_PEAK: f64 = 1e18;

/// Dense (not 2:4 sparse) tensor-core peak throughput per math dtype.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DensePeak {
    /// BF16 inputs, FP32 accumulate.
    pub bf16: Option<FlopsPerSec>,
    /// FP8 (e4m3/e5m2) inputs.
    pub fp8: Option<FlopsPerSec>,
    /// FP4 (e2m1, NVFP4/MXFP4 block-scaled) inputs.
    pub fp4: Option<FlopsPerSec>,
    /// INT8 inputs (operations per second).
    pub int8: Option<FlopsPerSec>,
}

/// Tensor-core math dtypes a GEMM can run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MathDtype {
    Bf16,
    Fp8,
    Fp4,
    Int8,
}

impl MathDtype {
    pub const ALL: [MathDtype; 4] = [
        MathDtype::Bf16,
        MathDtype::Fp8,
        MathDtype::Fp4,
        MathDtype::Int8,
    ];
    pub fn name(self) -> &'static str {
        match self {
            MathDtype::Bf16 => "bf16",
            MathDtype::Fp8 => "fp8",
            MathDtype::Fp4 => "fp4",
            MathDtype::Int8 => "int8",
        }
    }
}

/// One GPU model, read 1:1 from `configs/gpus/<name>.toml`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Short name used on the command line.
    pub name: String,
    /// Marketing name.
    pub full_name: String,
    /// Architecture and compute capability, for the reader.
    #[serde(default)]
    pub architecture: String,
    /// Device memory capacity.
    pub memory_capacity: Bytes,
    /// Peak DRAM bandwidth.
    pub memory_bandwidth: BytesPerSec,
    /// Streaming multiprocessors (on AMD parts: compute units, the CDNA equivalent).
    #[serde(default)]
    pub sm_count: Option<u32>,
    /// Boost clock the dense peaks assume.
    #[serde(default)]
    pub boost_clock: Option<Hertz>,
    /// Last-level cache.
    #[serde(default)]
    pub l2_cache: Option<Bytes>,
    /// Name of the interconnect the card attaches to the host by.
    #[serde(default)]
    pub host_link: Option<String>,
    /// Board power (TDP, the default power limit) the boost clock and peaks are rated at.
    #[serde(default)]
    pub board_power: Option<Watts>,
    /// Power the board draws powered on with nothing running (driver loaded, clocks idle).
    #[serde(default)]
    pub idle_power: Option<Watts>,
    /// The power limit the board runs under (`nvidia-smi -pl`); absent, the board power.
    /// Below the board power it lowers the sustained clock, and the tensor peaks with it
    /// ([`GpuSpec::clock_ratio`]); memory bandwidth stays.
    #[serde(default)]
    pub power_limit: Option<Watts>,
    /// Dense tensor peaks per dtype.
    pub dense_peak: DensePeak,
    /// Where each figure comes from: field name → citation.
    pub sources: BTreeMap<String, String>,
}

impl GpuSpec {
    /// Exponent k of dynamic power against clock, P_dyn ∝ f^k, under a power limit: CMOS
    /// switching power is C·V²·f, and across the DVFS range the supply voltage falls about
    /// in step with the clock, so P_dyn ∝ f³ (the "cube law" of voltage-frequency scaling;
    /// see the GPU DVFS survey of Mishra & Khare, Open Journal of Energy Efficiency 4:77-86,
    /// 2015, for P_dyn = αCV²f on GPUs) [U prior: k = 3, not fitted]. Checks, not fits (tests/
    /// power.rs): an RTX PRO 6000 at 300 W comes out near the 2,288 MHz the 300 W Max-Q
    /// edition is rated at, and between 500 and 600 W its clock moves by a few percent, as
    /// shared/reference/hardware.md notes (about 1.9 GHz under sustained tensor load at
    /// 500-600 W).
    pub const POWER_CLOCK_EXPONENT: f64 = 3.0;

    /// Idle power as a share of board power where a description gives none: H200 measured
    /// 80 W idle of its 700 W (configs/gpus/h200.toml) [U prior].
    pub const IDLE_SHARE_PRIOR: f64 = 0.11;

    /// The power limit in force: `power_limit`, or the board power.
    pub fn limit(&self) -> Option<Watts> {
        self.power_limit.or(self.board_power)
    }

    /// Idle power: the description's, or [`Self::IDLE_SHARE_PRIOR`] of the board power.
    pub fn idle(&self) -> Option<Watts> {
        self.idle_power.or(self
            .board_power
            .map(|b| Watts(b.0 * Self::IDLE_SHARE_PRIOR)))
    }

    /// Sustained clock under the power limit as a fraction of the clock the peaks assume:
    /// 1 at or above the board power (a limit never raises a clock), else the clock at which
    /// the dynamic power under sustained load fits the limit,
    /// `((limit − idle) / (board − idle))^(1/k)` with k = [`Self::POWER_CLOCK_EXPONENT`].
    pub fn clock_ratio(&self) -> f64 {
        match (self.power_limit, self.board_power, self.idle()) {
            (Some(l), Some(b), Some(i)) if l.0 < b.0 && b.0 > i.0 => {
                (((l.0 - i.0) / (b.0 - i.0)).max(0.0)).powf(1.0 / Self::POWER_CLOCK_EXPONENT)
            }
            _ => 1.0,
        }
    }

    /// The GPU as it runs under its power limit: boost clock and every dense tensor peak
    /// scaled by [`Self::clock_ratio`]; memory bandwidth and capacity as described. The
    /// identity without a limit below the board power.
    pub fn at_power_limit(mut self) -> GpuSpec {
        let r = self.clock_ratio();
        if r < 1.0 {
            self.boost_clock = self.boost_clock.map(|c| Hertz(c.0 * r));
            let d = &mut self.dense_peak;
            for p in [&mut d.bf16, &mut d.fp8, &mut d.fp4, &mut d.int8]
                .into_iter()
                .flatten()
            {
                p.0 *= r;
            }
        }
        self
    }

    /// Dense peak for a math dtype, `None` where the GPU cannot run it natively.
    pub fn peak(&self, dtype: MathDtype) -> Option<FlopsPerSec> {
        match dtype {
            MathDtype::Bf16 => self.dense_peak.bf16,
            MathDtype::Fp8 => self.dense_peak.fp8,
            MathDtype::Fp4 => self.dense_peak.fp4,
            MathDtype::Int8 => self.dense_peak.int8,
        }
    }

    /// Bytes per clock one SM can draw from L2 at most: a stated prior, not a measurement.
    /// NVIDIA's A100 whitepaper gives 5,120 B/clk of L2 read bandwidth over 108 SMs (about
    /// 47 B/clk per SM); rounded up to 64 so that a speed of light built on it stays a bound
    /// on every generation it is applied to.
    pub const L2_BYTES_PER_CLOCK_PER_SM: f64 = 64.0;

    /// Upper bound on the rate the SMs read data resident in L2 (bytes/s): SMs x
    /// [`Self::L2_BYTES_PER_CLOCK_PER_SM`] x boost clock, never under the DRAM bandwidth;
    /// `None` where the description lacks the L2, SM count or clock. Only `validate` uses
    /// it: the speed of light of a benchmark call that re-reads an L2-resident cache, and
    /// the floor below which a kernel-table row is refused.
    pub fn l2_bandwidth(&self) -> Option<f64> {
        self.l2_cache?;
        let rate = self.sm_count? as f64 * Self::L2_BYTES_PER_CLOCK_PER_SM * self.boost_clock?.0;
        Some(rate.max(self.memory_bandwidth.0))
    }

    /// The compute capability `architecture` names as `SMnn` (e.g. 90 for "Hopper GH100, SM90").
    pub fn compute_capability(&self) -> Option<u32> {
        self.architecture
            .to_ascii_uppercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find_map(|w| w.strip_prefix("SM").and_then(|n| n.parse::<u32>().ok()))
    }

    /// Compute capabilities with kernel constants under `configs/kernels/`. SM103 (Blackwell
    /// Ultra: B300, GB300) runs the SM100 generation's kernels (`Generation::of`).
    pub const SUPPORTED_CAPABILITIES: [u32; 6] = [80, 89, 90, 100, 103, 120];

    /// The AMD gfx target `architecture` names as `gfxNNN` (e.g. 942 for "CDNA3 gfx942"):
    /// the LLVM target ROCm compiles for, which picks an AMD part's kernel generation as
    /// `SMnn` does an NVIDIA one's.
    pub fn gfx_target(&self) -> Option<u32> {
        self.architecture
            .to_ascii_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find_map(|w| w.strip_prefix("gfx").and_then(|n| n.parse::<u32>().ok()))
    }

    /// AMD gfx targets with kernel constants under `configs/kernels/` (CDNA3, CDNA4).
    pub const SUPPORTED_GFX_TARGETS: [u32; 2] = [942, 950];

    /// Check the physical constraints serde cannot: a BF16 peak (every GPU the cost model
    /// handles has one), and every figure inside a range no real device leaves (1 MB/s, 1 MB,
    /// 1 GFLOPS at the bottom; 1 PB of memory at the top; a clock from 100 MHz to 10 GHz), so
    /// no time or capacity the model derives from them can overflow, and a `host_link` that
    /// names an interconnect. A file and a `--set` are checked here alike (the loader reads a
    /// file, `--set` rewrites the loaded description, and both end in this one function), so
    /// no rule holds for one and not the other.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let nvidia = self
            .compute_capability()
            .is_some_and(|c| Self::SUPPORTED_CAPABILITIES.contains(&c));
        let amd = self
            .gfx_target()
            .is_some_and(|t| Self::SUPPORTED_GFX_TARGETS.contains(&t));
        if !(nvidia || amd) {
            return Err((
                "architecture".into(),
                "the compute capability as SM80 (Ampere), SM89 (Ada), SM90 (Hopper), SM100, SM103 \
                 or SM120 (Blackwell), or the AMD gfx target as gfx942 (CDNA3) or gfx950 (CDNA4): \
                 the generations with kernel constants in configs/kernels/"
                    .into(),
            ));
        }
        if self.sm_count.is_none_or(|n| n == 0 || n > MAX_SM_COUNT) {
            return Err((
                "sm_count".into(),
                format!(
                    "the number of streaming multiprocessors, or compute units on AMD parts (1 to \
                     {MAX_SM_COUNT})"
                ),
            ));
        }
        if !self.memory_bandwidth.is_plausible() {
            return Err((
                "memory_bandwidth".into(),
                format!(
                    "a bandwidth {}, got {}",
                    BytesPerSec::PLAUSIBLE_TEXT,
                    self.memory_bandwidth
                ),
            ));
        }
        if !(self.memory_capacity.0 >= 1e6 && self.memory_capacity.0 <= 1e15) {
            return Err((
                "memory_capacity".into(),
                "a capacity between 1 MB and 1 PB".into(),
            ));
        }
        if let Some(c) = self.boost_clock {
            if !(c.0 >= 1e8 && c.0 <= 1e10) {
                return Err((
                    "boost_clock".into(),
                    format!("a clock between 100 MHz and 10 GHz, got {c}"),
                ));
            }
        }
        if let Some(l2) = self.l2_cache {
            if !(l2.0 >= 1e3 && l2.0 <= self.memory_capacity.0) {
                return Err((
                    "l2_cache".into(),
                    format!(
                        "a cache between 1 KB and the memory capacity ({}), got {l2}",
                        self.memory_capacity
                    ),
                ));
            }
        }
        // `host_link` names an interconnect: a name that is none is a typo, not a fact.
        if let Some(h) = &self.host_link {
            use crate::spec::registry::{builtin_names, builtin_text, Kind};
            if builtin_text(Kind::Interconnect, h).is_none()
                && !crate::files::is_readable(std::path::Path::new(h))
            {
                return Err((
                    "host_link".into(),
                    format!(
                        "an interconnect (built-ins: {}), not \"{h}\"",
                        builtin_names(Kind::Interconnect).join(", ")
                    ),
                ));
            }
        }
        if let Some(p) = self.board_power {
            if !(p.0 >= 1.0 && p.0 <= 1e5) {
                return Err((
                    "board_power".into(),
                    format!("a board power between 1 W and 100 kW, got {p}"),
                ));
            }
        }
        if let Some(idle) = self.idle_power {
            let cap = self.board_power.map_or(1e5, |p| p.0);
            if !(idle.0 > 0.0 && idle.0 < cap) {
                return Err((
                    "idle_power".into(),
                    format!(
                        "an idle power above 0 W and below the board power ({}), got {idle}",
                        self.board_power
                            .map_or("100 kW".to_string(), |p| p.to_string())
                    ),
                ));
            }
        }
        if let Some(l) = self.power_limit {
            let Some(b) = self.board_power else {
                return Err((
                    "power_limit".into(),
                    "a board_power beside it (the limit is read against the board's rating)".into(),
                ));
            };
            let idle = self.idle().map_or(0.0, |i| i.0);
            if !(l.0 > idle && l.0 <= 2.0 * b.0) {
                return Err((
                    "power_limit".into(),
                    format!(
                        "a limit above the idle power ({}) and at most twice the board power ({}), got {l}",
                        Watts(idle),
                        Watts(2.0 * b.0)
                    ),
                ));
            }
        }
        match self.dense_peak.bf16 {
            Some(p) if (1e9..=MAX_PEAK).contains(&p.0) => {}
            _ => {
                return Err((
                    "dense_peak.bf16".into(),
                    "a BF16 peak between 1 GFLOPS and 1 EFLOPS".into(),
                ))
            }
        }
        for d in MathDtype::ALL {
            if let Some(p) = self.peak(d) {
                if !(1e9..=MAX_PEAK).contains(&p.0) {
                    return Err((
                        format!("dense_peak.{}", d.name()),
                        "a peak between 1 GFLOPS and 1 EFLOPS, or the key left out when the GPU \
                         lacks the dtype"
                            .into(),
                    ));
                }
            }
        }
        Ok(())
    }
}
