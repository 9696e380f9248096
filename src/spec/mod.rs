//! Descriptions as data: GPUs, interconnects, systems and models, read from TOML with units
//! in the text, validated, and resolved into the [`System`] the cost model evaluates.

pub mod client;
pub mod engine;
pub mod gpu;
pub mod interconnect;
pub mod model;
pub mod overrides;
pub mod registry;
pub mod system;

pub use gpu::{GpuSpec, MathDtype};
pub use interconnect::{
    BusFraction, CollectiveModel, InterconnectSpec, LinkKind, NvlsSpec, P2pLatency,
};
pub use model::{Attention, FormatKind, KvDtype, ModelSpec, Moe, PerFormat, WeightFormat};
pub use system::{
    AllReduceImpl, CpuVendor, Fabric, NcclAlgorithm, NcclP2pLevel, NcclProtocol, NcclRings,
    NodesSpec, PathBandwidth, RingRate, SystemSpec, Topology,
};

use crate::error::Result;
use engine::{EngineRef, EngineSpec};

/// An engine description resolved for `gpu_count` of `gpu`; errors name the engine file.
/// The engine `name` names (a built-in or a file, with `@RELEASE` for a release other than
/// its default) as it runs on `gpu_count` of `gpu`.
fn resolve_engine(name: &str, gpu: &GpuSpec, gpu_count: u32) -> Result<EngineSpec> {
    let (base, release) = match name.rsplit_once('@') {
        Some((b, r)) if !b.is_empty() => (b, Some(r)),
        _ => (name, None),
    };
    let file = registry::load_engine(base)?;
    file.resolve(gpu, gpu_count, release)
        .map_err(|(field, expected)| crate::error::Error::Invalid {
            file: format!("engine {name} on {gpu_count} x {}", gpu.name),
            line: None,
            field,
            expected,
        })
}

/// A system with its GPU and interconnect descriptions resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct System {
    pub spec: SystemSpec,
    pub gpu: GpuSpec,
    pub link: InterconnectSpec,
    /// The engine the system serves with, resolved for its GPUs.
    pub engine: EngineSpec,
    /// The system description's efficiencies as written, before any `--set`: the priors a
    /// generation's measured kernel fractions are scaled against. A what-if that sets
    /// `efficiency.*` changes `spec.efficiency` (the default parameters), and the kernels
    /// move by its ratio to these; rebuilt from the overridden spec, the two would cancel.
    pub described_efficiency: system::EfficiencySpec,
}

/// A field error of a description after `--set` overrides, labelled with the description
/// and the `--set` that reaches the field (or every `--set` of that description, when none
/// names it: a swapped part, `system.gpu=...`, is checked here too).
pub(crate) fn after_set(
    label: &str,
    target: overrides::Target,
    sets: &[overrides::Override],
    (field, expected): (String, String),
) -> crate::error::Error {
    let mine: Vec<&overrides::Override> = sets.iter().filter(|o| o.target == target).collect();
    let reaching: Vec<&str> = mine
        .iter()
        .filter(|o| {
            let path = o.path.join(".");
            field == path || field.starts_with(&format!("{path}.")) || path.starts_with(&field)
        })
        .map(|o| o.raw.as_str())
        .collect();
    let named = if reaching.is_empty() {
        mine.iter().map(|o| o.raw.as_str()).collect()
    } else {
        reaching
    };
    let after = match named.as_slice() {
        [] => "(after --set)".to_string(),
        n => format!("(after --set {})", n.join(", --set ")),
    };
    crate::error::Error::Invalid {
        file: format!("{label} {after}"),
        line: None,
        field,
        expected,
    }
}

impl System {
    /// Load a system by built-in name or path, with the GPU and interconnect it names.
    pub fn load(name: &str) -> Result<System> {
        System::load_with(name, &[])
    }

    /// Load with `--set` overrides applied (system first, so `system.gpu` or
    /// `system.interconnect` can swap the parts, then the parts).
    pub fn load_with(name: &str, sets: &[overrides::Override]) -> Result<System> {
        System::load_with_engine(name, None, sets)
    }

    /// Load with the engine named by `engine` (a built-in or a path) in place of the system's
    /// default, and `--set` overrides applied (`engine.*` to the resolved engine).
    pub fn load_with_engine(
        name: &str,
        engine: Option<&str>,
        sets: &[overrides::Override],
    ) -> Result<System> {
        use overrides::{apply, Target};
        // Two engines named for one system: one would win without a word.
        if let (Some(e), Some(o)) = (
            engine,
            sets.iter()
                .find(|o| o.target == Target::System && o.path == ["engine"]),
        ) {
            return Err(crate::error::Error::Usage(format!(
                "{name}: engine {e} is given (--engine, or the run's mapping) and {} names \
                 another: give one",
                o.raw
            )));
        }
        let mut file = registry::load_system_spec(name)?;
        // A relative path inside a system file names a file beside it, not one in whatever
        // folder rooftop runs in (`--set system.gpu=...` stays relative to the shell's).
        if let Some(dir) = std::path::Path::new(name)
            .parent()
            .filter(|_| crate::files::is_readable(std::path::Path::new(name)))
        {
            for part in [&mut file.gpu, &mut file.interconnect] {
                let p = std::path::Path::new(part.as_str());
                let looks_like_path = part.contains('/') || part.ends_with(".toml");
                if looks_like_path && p.is_relative() {
                    *part = dir.join(p).display().to_string();
                }
            }
        }
        let described_efficiency = file.efficiency;
        let mut spec: SystemSpec = apply(&file, Target::System, sets, name)?;
        spec.validate()
            .map_err(|fe| after_set(name, Target::System, sets, fe))?;
        let gpu = registry::load_gpu(&spec.gpu)?;
        let gpu: GpuSpec = apply(&gpu, Target::Gpu, sets, &spec.gpu)?;
        gpu.validate()
            .map_err(|fe| after_set(&spec.gpu, Target::Gpu, sets, fe))?;
        // The GPU as it runs: a power limit below the board power lowers the clock and the
        // tensor peaks with it (the identity otherwise, so no number moves without one).
        let gpu = gpu.at_power_limit();
        let link = registry::load_interconnect(&spec.interconnect)?;
        let described = link.bandwidth_per_direction.0;
        let link: InterconnectSpec = apply(&link, Target::Interconnect, sets, &spec.interconnect)?;
        // "Would NVLink help?" is one override, `--set system.interconnect=nvlink4|5`: a link
        // swapped to another kind brings its own topology (NVLink boxes are NVSwitch ones;
        // a PCIe link on an NVSwitch box means GPUs on root ports), unless the user set
        // `system.topology` too. A link and a topology no machine pairs are refused below.
        let topology_set = sets
            .iter()
            .any(|o| o.target == Target::System && o.path == ["topology"]);
        let fits = link.kind.topologies();
        if spec.interconnect != file.interconnect && !topology_set && !fits.contains(&spec.topology)
        {
            spec.topology = fits[0];
        }
        if !fits.contains(&spec.topology) {
            let names: Vec<&str> = fits.iter().map(|t| t.name()).collect();
            // A file that pairs them itself is named with its line; one the overrides made
            // so says so.
            let by_set = sets
                .iter()
                .any(|o| matches!(o.target, Target::System | Target::Interconnect));
            let line = (!by_set)
                .then(|| std::fs::read_to_string(name).ok())
                .flatten()
                .and_then(|text| crate::error::line_of_field(&text, "topology"));
            return Err(crate::error::Error::Invalid {
                file: if by_set {
                    format!("{name} (after --set)")
                } else {
                    name.to_string()
                },
                line,
                field: "topology".into(),
                expected: format!(
                    "a topology that a {} link ({}) runs in: {}; to ask what NVLink would \
                     change, set only system.interconnect=nvlink4 or nvlink5",
                    link.name,
                    link.kind.label(),
                    names.join(" or ")
                ),
            });
        }
        // The system's path bandwidths were measured on its own link: a swapped link leaves
        // them behind (the new link's fractions apply), a faster or slower one scales them.
        spec.paths = if spec.interconnect != file.interconnect {
            None
        } else {
            spec.paths
                .map(|p| p.scaled(link.bandwidth_per_direction.0 / described))
        };
        link.validate()
            .map_err(|fe| after_set(&spec.interconnect, Target::Interconnect, sets, fe))?;
        let resolved = match (engine, &spec.engine) {
            // The engine's size rules (vLLM's one-shot limit by GPU count) read one node: its
            // custom kernels never leave it.
            (Some(e), _) => resolve_engine(e, &gpu, spec.gpus_per_node())?,
            (None, EngineRef::Name(e)) => resolve_engine(e, &gpu, spec.gpus_per_node())?,
            (None, EngineRef::Inline(e)) => (**e).clone(),
        };
        if let Some(p) = &spec.paths {
            let raw = link.bandwidth_per_direction.0 * 1.0001;
            if let Some((field, _)) = p.fields().find(|(_, b)| b.0 > raw) {
                return Err(crate::error::Error::Invalid {
                    file: name.to_string(),
                    line: None,
                    field,
                    expected: format!(
                        "a bandwidth no higher than {}'s raw {}",
                        link.name, link.bandwidth_per_direction
                    ),
                });
            }
        }
        let label = resolved.name.clone();
        let engine: EngineSpec = apply(&resolved, Target::Engine, sets, &label)?;
        engine
            .validate()
            .map_err(|fe| after_set(&label, Target::Engine, sets, fe))?;
        // The reserve comes out of the memory the engine may use: one as large leaves a
        // negative KV budget, which is no answer.
        let usable = engine.usable_memory(gpu.memory_capacity.0);
        if engine.activation_reserve.0 >= usable {
            return Err(crate::error::Error::Invalid {
                file: name.into(),
                line: None,
                field: "engine.activation_reserve".into(),
                expected: format!(
                    "less than the memory the engine may use on {} ({})",
                    gpu.name,
                    match engine.memory_fraction_of {
                        engine::MemoryFractionOf::Total => format!(
                            "{} × {} = {}",
                            gpu.memory_capacity,
                            engine.gpu_memory_utilization.0,
                            crate::units::Bytes(usable)
                        ),
                        engine::MemoryFractionOf::Free => format!("{}", gpu.memory_capacity),
                    }
                ),
            });
        }
        Ok(System {
            spec,
            gpu,
            link,
            engine,
            described_efficiency,
        })
    }
}
