//! Launching a kernel with plain scalar and device-pointer arguments.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaStream};

use crate::error::CudaError;
use crate::launch::LaunchShape;
use crate::program::{Arg, MAX_ARGS};
use crate::runtime::driver::driver;

#[cfg(target_endian = "big")]
compile_error!("kernel arguments are packed little-endian, as on every CUDA host");

/// Launches `function` with `args` on `stream`.
pub(crate) fn launch(
    stream: &Arc<CudaStream>,
    function: &CudaFunction,
    shape: LaunchShape,
    args: &[Arg],
) -> Result<(), CudaError> {
    let mut slots = [0u64; MAX_ARGS];
    for (slot, arg) in slots.iter_mut().zip(args) {
        *slot = arg.to_slot();
    }
    let mut params = [std::ptr::null_mut::<c_void>(); MAX_ARGS];
    for (param, slot) in params.iter_mut().zip(slots.iter_mut()) {
        *param = (slot as *mut u64).cast();
    }
    // SAFETY: `params[..args.len()]` point to live slots holding exactly the values, in order,
    // of the kernel's parameters (the step builder passes the arguments each kernel declares,
    // checked by the host-emulation tests); device pointers come from live allocations of this
    // model, with the bounds the shapes were computed from.
    unsafe {
        cudarc::driver::result::launch_kernel(
            function.cu_function(),
            shape.grid,
            shape.block,
            0,
            stream.cu_stream(),
            &mut params[..args.len()],
        )
    }
    .map_err(driver("kernel launch"))
}
