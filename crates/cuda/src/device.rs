//! A GPU as the driver describes it; which device runs a model is the engine's choice
//! (`rinfer_model::engine::DeviceRequest`).

use std::fmt;

/// A GPU as the driver describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    /// Its ordinal.
    pub ordinal: usize,
    /// Its marketing name.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// Total memory in bytes.
    pub total_memory: u64,
    /// The NVRTC that compiled the kernels (version and file), once a model is loaded.
    pub nvrtc: Option<String>,
}

impl fmt::Display for GpuInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.compute_capability;
        write!(
            f,
            "cuda:{} ({}, sm_{major}{minor}, {} MiB)",
            self.ordinal,
            self.name,
            self.total_memory >> 20
        )?;
        if let Some(nvrtc) = &self.nvrtc {
            write!(f, ", kernels compiled by {nvrtc}")?;
        }
        Ok(())
    }
}
