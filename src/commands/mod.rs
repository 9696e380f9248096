//! One module per command: turn validated options into scenarios, run them, and render the
//! result record in the requested format. Every command returns the text to print.

pub mod catalog;
pub mod import_hf;
pub mod op;
pub mod predict;

use crate::cli::ScenarioArgs;
use crate::cost::Parallel;
use crate::error::Result;
use crate::spec::{registry, ModelSpec, System};

/// Model, system and layout loaded from the common options.
pub struct Loaded {
    pub model: ModelSpec,
    pub system: System,
    pub parallel: Parallel,
}

pub fn load(args: &ScenarioArgs) -> Result<Loaded> {
    let model = registry::load_model(&args.model)?;
    let system = System::load(&args.system)?;
    let parallel = Parallel::resolve(&system, args.tp, args.ep, args.pp, args.dp)?;
    parallel.validate(&model, &system)?;
    Ok(Loaded {
        model,
        system,
        parallel,
    })
}
