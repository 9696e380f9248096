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
        let spec = registry::load_system_spec(name)?;
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
        Ok(System { spec, gpu, link })
    }
}
