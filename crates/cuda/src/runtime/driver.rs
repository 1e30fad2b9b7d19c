//! Opening the driver and a device, and compiling the kernels with NVRTC.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, DriverError};

use crate::device::GpuInfo;
use crate::error::CudaError;
use crate::nvrtc_search::NvrtcSearch;
use crate::runtime::nvrtc::Nvrtc;

/// A driver error as a [`CudaError`] naming the operation.
pub(crate) fn driver(op: &'static str) -> impl FnOnce(DriverError) -> CudaError {
    move |error| CudaError::Driver {
        op,
        message: error.to_string(),
    }
}

/// The library file names cudarc tries for `name`, without duplicates and, on Unix, without
/// the Windows-style `name64_*` spellings.
fn searched(name: &str) -> String {
    let mut names: Vec<String> = Vec::new();
    for candidate in cudarc::get_lib_name_candidates(name) {
        let skip = cfg!(unix) && candidate.contains(&format!("{name}64"));
        if !skip && !names.contains(&candidate) {
            names.push(candidate);
        }
    }
    names.join(", ")
}

/// Opens device `ordinal`, failing with an error (never a panic) when the driver library is
/// missing or has no such device.
pub(crate) fn open(ordinal: usize) -> Result<(Arc<CudaContext>, GpuInfo), CudaError> {
    // SAFETY: only tries to dlopen the driver library by name; no symbol is called.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(CudaError::NoDriver {
            searched: searched("cuda"),
        });
    }
    let count = CudaContext::device_count().map_err(|error| {
        if error.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NO_DEVICE {
            CudaError::NoDevice { ordinal, count: 0 }
        } else {
            driver("initialisation")(error)
        }
    })?;
    let count = usize::try_from(count).unwrap_or(0);
    if ordinal >= count {
        return Err(CudaError::NoDevice { ordinal, count });
    }
    let ctx = CudaContext::new(ordinal).map_err(driver("context creation"))?;
    // SAFETY: rinfer runs all work of a model on one stream, so the per-buffer events cudarc
    // records for cross-stream synchronisation are not needed (and would be recorded inside
    // graph captures).
    unsafe { ctx.disable_event_tracking() };
    let attribute = |a| {
        ctx.attribute(a)
            .map_err(driver("device query"))
            .map(|v| u32::try_from(v).unwrap_or(0))
    };
    let info = GpuInfo {
        ordinal,
        name: ctx.name().map_err(driver("device query"))?,
        compute_capability: (
            attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        total_memory: ctx.total_mem().map_err(driver("device query"))? as u64,
        nvrtc: None,
    };
    Ok((ctx, info))
}

/// Describes GPU `ordinal` without loading anything onto it.
pub fn probe(ordinal: usize) -> Result<GpuInfo, CudaError> {
    open(ordinal).map(|(_, info)| info)
}

/// The CUDA major version of the installed driver (`None` without one), which decides the
/// NVRTC preferred.
pub(crate) fn driver_cuda_major() -> Option<u32> {
    // SAFETY: only tries to dlopen the driver library by name; no symbol is called.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return None;
    }
    let mut version = 0;
    // SAFETY: cuDriverGetVersion needs no initialisation and writes one int.
    let status = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    (status == cudarc::driver::sys::CUresult::CUDA_SUCCESS && version > 0)
        .then_some((version / 1000) as u32)
}

/// Compiles the kernel program to a CUBIN for compute capability `arch` (e.g. `(9, 0)`) with
/// the NVRTC [`Nvrtc::find`] picks in `search` for the installed driver (the newest without
/// one). Needs only NVRTC, not a GPU.
pub fn compile_kernels(search: &NvrtcSearch, arch: (u32, u32)) -> Result<Vec<u8>, CudaError> {
    Nvrtc::find(search, driver_cuda_major())?.compile(&crate::kernels::program_source(), arch)
}
