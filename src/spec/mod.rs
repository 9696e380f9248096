//! Descriptions as data: GPUs, interconnects, systems and models, read from TOML with units
//! in the text, validated, and resolved into the [`System`] the cost model evaluates.

pub mod gpu;
pub mod interconnect;
pub mod model;
pub mod registry;
pub mod system;

pub use gpu::{GpuSpec, MathDtype};
pub use interconnect::{InterconnectSpec, LinkKind};
pub use model::{Attention, FormatKind, KvDtype, ModelSpec, Moe, WeightFormat};
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
        let spec = registry::load_system_spec(name)?;
        let gpu = registry::load_gpu(&spec.gpu)?;
        let link = registry::load_interconnect(&spec.interconnect)?;
        Ok(System { spec, gpu, link })
    }
}
