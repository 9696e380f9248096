//! Descriptions as data: GPUs, interconnects, systems and models, read from TOML with units
//! in the text, validated, and resolved into the [`System`] the cost model evaluates.

pub mod gpu;
pub mod interconnect;
pub mod model;
pub mod overrides;
pub mod registry;
pub mod system;

pub use gpu::{GpuSpec, MathDtype};
pub use interconnect::{InterconnectSpec, LinkKind};
pub use model::{Attention, FormatKind, KvDtype, ModelSpec, Moe, PerFormat, WeightFormat};
pub use system::{AllReduceImpl, NcclAlgorithm, NcclProtocol, SystemSpec, Topology};

use crate::error::Result;

/// A system with its GPU and interconnect descriptions resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct System {
    pub spec: SystemSpec,
    pub gpu: GpuSpec,
    pub link: InterconnectSpec,
}

impl System {
    /// Load a system by built-in name or path, with the GPU and interconnect it names.
    pub fn load(name: &str) -> Result<System> {
        System::load_with(name, &[])
    }

    /// Load with `--set` overrides applied (system first, so `system.gpu` or
    /// `system.interconnect` can swap the parts, then the parts).
    pub fn load_with(name: &str, sets: &[overrides::Override]) -> Result<System> {
        use overrides::{apply, Target};
        let mut spec = registry::load_system_spec(name)?;
        // A relative path inside a system file names a file beside it, not one in whatever
        // folder rooftop runs in (`--set system.gpu=...` stays relative to the shell's).
        if let Some(dir) = std::path::Path::new(name)
            .parent()
            .filter(|_| crate::files::is_readable(std::path::Path::new(name)))
        {
            for part in [&mut spec.gpu, &mut spec.interconnect] {
                let p = std::path::Path::new(part.as_str());
                let looks_like_path = part.contains('/') || part.ends_with(".toml");
                if looks_like_path && p.is_relative() {
                    *part = dir.join(p).display().to_string();
                }
            }
        }
        let spec: SystemSpec = apply(&spec, Target::System, sets, name)?;
        spec.validate()
            .map_err(|(f, e)| crate::error::Error::Invalid {
                file: format!("{name} (after --set)"),
                line: None,
                field: f,
                expected: e,
            })?;
        let gpu = registry::load_gpu(&spec.gpu)?;
        let gpu: GpuSpec = apply(&gpu, Target::Gpu, sets, &spec.gpu)?;
        gpu.validate()
            .map_err(|(f, e)| crate::error::Error::Invalid {
                file: format!("{} (after --set)", spec.gpu),
                line: None,
                field: f,
                expected: e,
            })?;
        let link = registry::load_interconnect(&spec.interconnect)?;
        let link: InterconnectSpec = apply(&link, Target::Interconnect, sets, &spec.interconnect)?;
        link.validate()
            .map_err(|(f, e)| crate::error::Error::Invalid {
                file: format!("{} (after --set)", spec.interconnect),
                line: None,
                field: f,
                expected: e,
            })?;
        // The reserve comes out of the memory the engine may use: one as large leaves a
        // negative KV budget, which is no answer.
        let usable = gpu.memory_capacity.0 * spec.engine.gpu_memory_utilization.0;
        if spec.engine.activation_reserve.0 >= usable {
            return Err(crate::error::Error::Invalid {
                file: name.into(),
                line: None,
                field: "engine.activation_reserve".into(),
                expected: format!(
                    "less than the memory the engine may use on {} ({} × {} = {})",
                    gpu.name,
                    gpu.memory_capacity,
                    spec.engine.gpu_memory_utilization.0,
                    crate::units::Bytes(usable)
                ),
            });
        }
        Ok(System { spec, gpu, link })
    }
}
