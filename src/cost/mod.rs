//! The cost model: per-operator roofline and collective costs, assembled per layer into the
//! time of a forward pass, with the parameters (efficiencies, fixed costs) kept separate.

pub mod collective;
pub mod moe;
pub mod ops;
pub mod params;
pub mod roofline;
pub mod scenario;
pub mod step;
pub mod weights;

pub use ops::{Breakdown, Category, OpCost};
pub use params::{CostParams, Provenance};
pub use roofline::Bound;
pub use scenario::{Parallel, Pass, Phase};
pub use step::{Evaluator, StepCost};
