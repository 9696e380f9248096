//! Descriptions as data: GPUs, interconnects, systems and models, read from TOML with units
//! in the text, validated, and resolved into the [`System`] the cost model evaluates.

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
pub use system::{AllReduceImpl, NcclAlgorithm, NcclProtocol, PathBandwidth, SystemSpec, Topology};

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
        let file = registry::load_system_spec(name)?;
        let mut spec: SystemSpec = apply(&file, Target::System, sets, name)?;
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
        let described = link.bandwidth_per_direction.0;
        let link: InterconnectSpec = apply(&link, Target::Interconnect, sets, &spec.interconnect)?;
        // The system's path bandwidths were measured on its own link: a swapped link leaves
        // them behind (the new link's fractions apply), a faster or slower one scales them.
        spec.paths = if spec.interconnect != file.interconnect {
            None
        } else {
            spec.paths
                .map(|p| p.scaled(link.bandwidth_per_direction.0 / described))
        };
        link.validate()
            .map_err(|(f, e)| crate::error::Error::Invalid {
                file: format!("{} (after --set)", spec.interconnect),
                line: None,
                field: f,
                expected: e,
            })?;
        if let Some(p) = &spec.paths {
            let raw = link.bandwidth_per_direction.0 * 1.0001;
            if let Some((field, _)) = p.fields().find(|(_, b)| b.0 > raw) {
                return Err(crate::error::Error::Invalid {
                    file: name.to_string(),
                    line: None,
                    field: field.into(),
                    expected: format!(
                        "a bandwidth no higher than {}'s raw {}",
                        link.name, link.bandwidth_per_direction
                    ),
                });
            }
        }
        Ok(System { spec, gpu, link })
    }
}
