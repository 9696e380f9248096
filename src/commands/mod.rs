//! One module per command: turn validated options into scenarios, run them, and render the
//! result record in the requested format. Every command returns the text to print.

pub mod calibrate;
pub mod catalog;
pub mod deploy;
pub mod explain;
pub mod holdout;
pub mod import_hf;
pub mod kernel_validate;
pub mod op;
pub mod plan;
pub mod plot;
pub mod predict;
pub mod specdec;
pub mod sweep;
pub mod validate_e2e;
pub mod validate_specdec;
pub mod whatif;

use crate::calibrate::Calibration;
use crate::cli::ScenarioArgs;
use crate::cost::Parallel;
use crate::error::Result;
use crate::predict::Scenario;
use crate::spec::{registry, ModelSpec, System};

/// Model, system, layout and parameters loaded from the common options.
pub struct Loaded {
    pub model: ModelSpec,
    pub system: System,
    pub parallel: Parallel,
    /// The calibration, when `--calibration` was given.
    pub calibration: Option<Calibration>,
}

impl Loaded {
    /// The scenario with default or calibrated parameters.
    pub fn scenario(&self) -> Result<Scenario<'_>> {
        let s = Scenario::new(&self.model, &self.system, self.parallel)?;
        Ok(match &self.calibration {
            Some(c) => s.calibrated(c),
            None => s,
        })
    }
}

/// The model named by `--model` with the `--set model.*` overrides applied and validated.
/// The first layout option (`--tp`, `--ep`, `--pp`, `--dp`) or `--calibration` given: a
/// command that chooses layouts itself refuses it.
pub fn chosen_layout_flag(args: &ScenarioArgs) -> Option<&'static str> {
    [
        ("--tp", args.tp.is_some()),
        ("--ep", args.ep.is_some()),
        ("--pp", args.pp.is_some()),
        ("--dp", args.dp.is_some()),
        ("--redundant-experts", args.redundant_experts.is_some()),
        ("--calibration", args.calibration.is_some()),
    ]
    .into_iter()
    .find(|(_, given)| *given)
    .map(|(flag, _)| flag)
}

pub fn load_model(args: &ScenarioArgs) -> Result<ModelSpec> {
    let sets = crate::spec::overrides::parse_all(&args.set)?;
    let model = registry::load_model(&args.model)?;
    let model: ModelSpec = crate::spec::overrides::apply(
        &model,
        crate::spec::overrides::Target::Model,
        &sets,
        &args.model,
    )?;
    model.validate().map_err(|fe| {
        crate::spec::after_set(
            &args.model,
            crate::spec::overrides::Target::Model,
            &sets,
            fe,
        )
    })?;
    Ok(model)
}

pub fn load(args: &ScenarioArgs) -> Result<Loaded> {
    let sets = crate::spec::overrides::parse_all(&args.set)?;
    let model = load_model(args)?;
    let system = System::load_with_engine(&args.system, args.engine.as_deref(), &sets)?;
    let parallel = Parallel {
        redundant_experts: args.redundant_experts.unwrap_or(0),
        ..Parallel::resolve(&system, args.tp, args.ep, args.pp, args.dp)?
    };
    parallel
        .validate(&model, &system)
        .map_err(|e| crate::layouts::with_suggestions(e, &model, &system, &parallel, 1.0, 1.0))?;
    let calibration = match args.calibration.as_deref() {
        Some(file) => {
            let (c, note) = Calibration::load(file)?.for_run(
                &model.name,
                &system,
                &parallel.to_string(),
                args.transfer_calibration,
                file,
            )?;
            if let Some(n) = note {
                crate::cli::stderr_line(&format!("note: {n}"));
            }
            c.refuse_overridden(&sets, file)?;
            Some(c)
        }
        None => None,
    };
    Ok(Loaded {
        model,
        system,
        parallel,
        calibration,
    })
}
