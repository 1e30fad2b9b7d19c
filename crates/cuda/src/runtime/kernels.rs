//! The compiled kernel module and its functions, looked up once at load.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction};
use cudarc::nvrtc::Ptx;

use crate::error::CudaError;
use crate::kernels::{FIXED_KERNELS, GpuType};
use crate::runtime::driver::{compile_kernels, driver};

/// The kernels of one weight format.
#[derive(Clone, Debug)]
pub(crate) struct WeightKernels {
    /// One token.
    pub matvec: CudaFunction,
    /// Several tokens.
    pub matmul: CudaFunction,
    /// Embedding lookup.
    pub get_rows: CudaFunction,
}

/// Every kernel, by name.
pub(crate) struct Kernels {
    fixed: HashMap<&'static str, CudaFunction>,
    weights: HashMap<GpuType, WeightKernels>,
}

impl Kernels {
    /// Compiles the program for the device's architecture and loads every kernel.
    pub fn load(ctx: &Arc<CudaContext>, arch: (u32, u32)) -> Result<Self, CudaError> {
        let cubin = compile_kernels(arch)?;
        let module = ctx
            .load_module(Ptx::from_binary(cubin))
            .map_err(driver("module load"))?;
        let function = |name: &str| module.load_function(name).map_err(driver("kernel lookup"));
        let mut fixed = HashMap::new();
        for &name in FIXED_KERNELS {
            fixed.insert(name, function(name)?);
        }
        let mut weights = HashMap::new();
        for ty in GpuType::ALL {
            weights.insert(
                ty,
                WeightKernels {
                    matvec: function(&ty.matvec_kernel())?,
                    matmul: function(&ty.matmul_kernel())?,
                    get_rows: function(&ty.get_rows_kernel())?,
                },
            );
        }
        Ok(Self { fixed, weights })
    }

    /// A format-independent kernel (the name is one of [`FIXED_KERNELS`]).
    pub fn get(&self, name: &'static str) -> &CudaFunction {
        &self.fixed[name]
    }

    /// The kernels of a weight format.
    pub fn weights(&self, ty: GpuType) -> &WeightKernels {
        &self.weights[&ty]
    }
}
