//! Choosing where a model runs: `--device cpu|cuda|auto`, and the report of what was chosen.

use std::fmt;
use std::str::FromStr;

use crate::error::CudaError;

/// The device the user asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceRequest {
    /// The CPU kernels.
    Cpu,
    /// The GPU; failing to set it up is an error.
    Cuda,
    /// The GPU when one is usable, otherwise the CPU with the reason reported.
    #[default]
    Auto,
}

impl FromStr for DeviceRequest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda),
            "auto" => Ok(Self::Auto),
            other => Err(format!(
                "unknown device {other:?}; expected cpu, cuda or auto"
            )),
        }
    }
}

impl fmt::Display for DeviceRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
            Self::Auto => "auto",
        })
    }
}

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
        )
    }
}

/// Where a model ended up: the value behind `device` in logs, `/health` and `--json` timings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceReport {
    /// The CPU, with why (the user's choice, or why no GPU was usable).
    Cpu {
        /// Why the CPU runs the model.
        reason: String,
    },
    /// A GPU.
    Cuda(GpuInfo),
}

impl DeviceReport {
    /// `"cpu"` or `"cuda"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Cpu { .. } => "cpu",
            Self::Cuda(_) => "cuda",
        }
    }
}

impl fmt::Display for DeviceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu { reason } => write!(f, "cpu ({reason})"),
            Self::Cuda(gpu) => gpu.fmt(f),
        }
    }
}

/// The outcome of [`resolve`]: a loaded GPU model, or the CPU and why.
pub enum Resolved<T> {
    /// Run on the CPU.
    Cpu {
        /// Why (shown to the user).
        reason: String,
    },
    /// Run on the GPU.
    Cuda(T),
}

/// Applies `request`: `cpu` never calls `load`; `cuda` returns its error; `auto` turns an error
/// into the CPU path with the error as the reason.
///
/// ```
/// use rinfer_cuda::{CudaError, DeviceRequest, Resolved, resolve};
///
/// let no_gpu = || Err::<(), _>(CudaError::NotBuilt);
/// assert!(resolve(DeviceRequest::Cuda, no_gpu).is_err());
/// match resolve(DeviceRequest::Auto, no_gpu)? {
///     Resolved::Cpu { reason } => assert!(reason.contains("without CUDA")),
///     Resolved::Cuda(()) => unreachable!(),
/// }
/// # Ok::<(), CudaError>(())
/// ```
pub fn resolve<T>(
    request: DeviceRequest,
    load: impl FnOnce() -> Result<T, CudaError>,
) -> Result<Resolved<T>, CudaError> {
    match request {
        DeviceRequest::Cpu => Ok(Resolved::Cpu {
            reason: "requested with --device cpu".into(),
        }),
        DeviceRequest::Cuda => load().map(Resolved::Cuda),
        DeviceRequest::Auto => Ok(match load() {
            Ok(model) => Resolved::Cuda(model),
            Err(error) => Resolved::Cpu {
                reason: format!("no usable CUDA device: {error}"),
            },
        }),
    }
}
