//! Opening the driver and a device, and compiling the kernels with NVRTC.

use std::ffi::{CStr, CString, c_char};
use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, DriverError};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};

use crate::device::GpuInfo;
use crate::error::CudaError;

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
    };
    Ok((ctx, info))
}

/// Describes GPU `ordinal` without loading anything onto it.
pub fn probe(ordinal: usize) -> Result<GpuInfo, CudaError> {
    open(ordinal).map(|(_, info)| info)
}

/// Compiles the kernel program to a CUBIN for compute capability `arch` (e.g. `(9, 0)`).
/// Needs only NVRTC, not a GPU.
pub fn compile_kernels(arch: (u32, u32)) -> Result<Vec<u8>, CudaError> {
    // SAFETY: only tries to dlopen the NVRTC library by name; no symbol is called.
    if !unsafe { nvrtc_sys::is_culib_present() } {
        return Err(CudaError::NoNvrtc {
            searched: searched("nvrtc"),
        });
    }
    let arch_name = format!("sm_{}{}", arch.0, arch.1);
    let fail = |log: String| CudaError::Compile {
        arch: arch_name.clone(),
        log,
    };
    let source = CString::new(crate::kernels::program_source())
        .map_err(|_| fail("the kernel source contains a NUL byte".into()))?;
    let program = nvrtc::create_program(&source, Some(c"rinfer_kernels.cu"))
        .map_err(|e| fail(format!("{e:?}")))?;
    let options = [
        format!("--gpu-architecture={arch_name}"),
        "--std=c++17".to_string(),
        "--device-as-default-execution-space".to_string(),
    ];
    // SAFETY: `program` was created above and is destroyed exactly once, below.
    let compiled = unsafe { nvrtc::compile_program(program, &options) };
    let result = match compiled {
        Err(error) => {
            // SAFETY: `program` is live.
            let log = unsafe { nvrtc::get_program_log(program) }
                .map(|log| c_chars_to_string(&log))
                .unwrap_or_default();
            Err(fail(format!("{error:?}: {log}")))
        }
        // SAFETY: `program` is live and compiled.
        Ok(()) => unsafe { cubin(program) }.map_err(|e| fail(format!("{e:?}"))),
    };
    // SAFETY: `program` is live and not used after this.
    let _ = unsafe { nvrtc::destroy_program(program) };
    result
}

/// The CUBIN of a compiled program.
///
/// # Safety
/// `program` must be a live, successfully compiled NVRTC program.
unsafe fn cubin(program: nvrtc_sys::nvrtcProgram) -> Result<Vec<u8>, nvrtc::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: `program` is live (the caller's contract) and `size` is a valid out-pointer.
    unsafe { nvrtc_sys::nvrtcGetCUBINSize(program, &mut size) }.result()?;
    let mut data = vec![0u8; size];
    // SAFETY: `data` holds the `size` bytes NVRTC reported.
    unsafe { nvrtc_sys::nvrtcGetCUBIN(program, data.as_mut_ptr().cast::<c_char>()) }.result()?;
    Ok(data)
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
}
