//! The engine's vocabulary of devices: what the user asks for (`--device cpu|cuda|auto`), how
//! a request is applied ([`resolve`]), and the report of what was chosen and why. A backend
//! only says whether it could start; choosing among backends is the engine's.

use std::fmt;
use std::str::FromStr;

pub use rinfer_cuda::GpuInfo;
pub use rinfer_cuda::nvrtc_search::NvrtcSearch;

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

/// The device asked for, with what setting a GPU up needs from the program's environment
/// (read by the program, once: this crate reads none). A [`DeviceRequest`] alone is a device
/// with the default search for NVRTC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Device {
    /// The device asked for.
    pub request: DeviceRequest,
    /// Where NVRTC is looked for when a GPU is set up.
    pub nvrtc: NvrtcSearch,
}

impl From<DeviceRequest> for Device {
    fn from(request: DeviceRequest) -> Self {
        Self {
            request,
            nvrtc: NvrtcSearch::default(),
        }
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

/// The outcome of [`resolve`]: a started GPU backend, or the CPU and why.
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
/// use rinfer_model::engine::{DeviceRequest, Resolved, resolve};
///
/// let no_gpu = || Err::<(), _>("rinfer was built without CUDA");
/// assert!(resolve(DeviceRequest::Cuda, no_gpu).is_err());
/// match resolve(DeviceRequest::Auto, no_gpu)? {
///     Resolved::Cpu { reason } => assert!(reason.contains("without CUDA")),
///     Resolved::Cuda(()) => unreachable!(),
/// }
/// # Ok::<(), &str>(())
/// ```
pub fn resolve<T, E: fmt::Display>(
    request: DeviceRequest,
    load: impl FnOnce() -> Result<T, E>,
) -> Result<Resolved<T>, E> {
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
