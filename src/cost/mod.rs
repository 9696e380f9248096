//! What it costs: the only place an operator gets a price, and where a pass's priced
//! operators add up to a step time.
//!
//! `ops/` says what runs; here `device` derives one GPU's rates under a parameter set,
//! `price` turns each operator into time (roofline, collective model, fixed costs), and
//! `step` sums a pass over its blocks, layers and pipeline stages. `params` holds the
//! efficiencies and fixed costs calibration may change; `memory` reads weight and KV bytes
//! off the same operator lists.

pub mod breakdown;
pub mod collective;
pub mod device;
pub mod generation;
pub mod kernels;
pub mod memory;
pub mod params;
pub mod power;
pub mod price;
pub mod roofline;
pub mod step;

pub use crate::ops::{Category, Parallel, Pass, Phase};
pub use breakdown::{Breakdown, OpCost};
pub use device::Device;
pub use params::{CostParams, Provenance};
pub use price::cost;
pub use roofline::Bound;
pub use step::{Evaluator, StepCost};
