//! Launching a kernel with plain scalar and device-pointer arguments.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaStream};

use crate::error::CudaError;
use crate::launch::LaunchShape;
use crate::runtime::driver::driver;

#[cfg(target_endian = "big")]
compile_error!("kernel arguments are packed little-endian, as on every CUDA host");

/// One kernel argument.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg {
    /// A device address (`const float*`, `const u8*`, ...); 0 is a null pointer.
    Ptr(u64),
    /// `int`.
    I32(i32),
    /// `long long`.
    I64(i64),
    /// `float`.
    F32(f32),
}

/// The most arguments any kernel takes.
const MAX_ARGS: usize = 20;

/// Launches `function` with `args` on `stream`.
pub(crate) fn launch(
    stream: &Arc<CudaStream>,
    function: &CudaFunction,
    shape: LaunchShape,
    args: &[Arg],
) -> Result<(), CudaError> {
    assert!(args.len() <= MAX_ARGS, "kernel with too many arguments");
    // Every argument lives in its own 8-byte slot; 4-byte arguments occupy the low half, which
    // is where the driver reads them on a little-endian host.
    let mut slots = [0u64; MAX_ARGS];
    for (slot, arg) in slots.iter_mut().zip(args) {
        *slot = match *arg {
            Arg::Ptr(p) => p,
            Arg::I32(v) => u64::from(v as u32),
            Arg::I64(v) => v as u64,
            Arg::F32(v) => u64::from(v.to_bits()),
        };
    }
    let mut params = [std::ptr::null_mut::<c_void>(); MAX_ARGS];
    for (param, slot) in params.iter_mut().zip(slots.iter_mut()) {
        *param = (slot as *mut u64).cast();
    }
    // SAFETY: `params[..args.len()]` point to live slots holding exactly the values, in order,
    // of the kernel's parameters (each call site passes the arguments its kernel declares);
    // device pointers come from live allocations of this model, with the bounds the shapes
    // were computed from.
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
