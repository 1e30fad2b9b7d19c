//! The compiled kernel module and its functions, looked up once at load.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction};
use cudarc::nvrtc::Ptx;

use crate::error::CudaError;
use crate::kernels::{FIXED_KERNELS, GpuType, kv_kernel_names};
use crate::program::KernelRef;
use crate::runtime::driver::driver;
use crate::runtime::nvrtc::Nvrtc;

/// The kernels of one weight format.
#[derive(Debug)]
struct WeightKernels {
    /// One token.
    matvec: CudaFunction,
    /// Several tokens.
    matmul: CudaFunction,
    /// Routed (token, expert) slots, one by one.
    matvec_id: CudaFunction,
    /// Routed slots grouped by expert.
    matmul_id: CudaFunction,
    /// Embedding lookup.
    get_rows: CudaFunction,
}

/// The integer matvecs of one block-quantized format over q8_1 activations.
#[derive(Debug)]
struct Q8_1Kernels {
    /// One token.
    matvec: CudaFunction,
    /// 2 to `MMVQ_TOKENS` tokens.
    batch: CudaFunction,
}

/// The tensor-core kernels of one quantized format.
#[derive(Debug)]
struct MmaKernels {
    /// Several tokens.
    mma: CudaFunction,
    /// Routed slots grouped by expert.
    mma_id: CudaFunction,
}

/// Every kernel, by name.
pub(crate) struct Kernels {
    fixed: HashMap<&'static str, CudaFunction>,
    weights: HashMap<GpuType, WeightKernels>,
    q8_1: HashMap<GpuType, Q8_1Kernels>,
    mma: HashMap<GpuType, MmaKernels>,
}

impl Kernels {
    /// Compiles the program with `nvrtc` for the device's architecture and loads every kernel.
    pub fn load(
        ctx: &Arc<CudaContext>,
        nvrtc: &Nvrtc,
        arch: (u32, u32),
    ) -> Result<Self, CudaError> {
        let cubin = nvrtc.compile(&crate::kernels::program_source(), arch)?;
        let module = ctx
            .load_module(Ptx::from_binary(cubin))
            .map_err(driver("module load"))?;
        let function = |name: &str| module.load_function(name).map_err(driver("kernel lookup"));
        let mut fixed = HashMap::new();
        for name in FIXED_KERNELS.iter().copied().chain(kv_kernel_names()) {
            fixed.insert(name, function(name)?);
        }
        let mut weights = HashMap::new();
        for ty in GpuType::ALL {
            weights.insert(
                ty,
                WeightKernels {
                    matvec: function(&ty.matvec_kernel())?,
                    matmul: function(&ty.matmul_kernel())?,
                    matvec_id: function(&ty.matvec_id_kernel())?,
                    matmul_id: function(&ty.matmul_id_kernel())?,
                    get_rows: function(&ty.get_rows_kernel())?,
                },
            );
        }
        let mut q8_1 = HashMap::new();
        for ty in GpuType::Q8_1 {
            q8_1.insert(
                ty,
                Q8_1Kernels {
                    matvec: function(&ty.matvec_q8_1_kernel())?,
                    batch: function(&ty.matvec_batch_q8_1_kernel())?,
                },
            );
        }
        let mut mma = HashMap::new();
        for ty in GpuType::ALL.into_iter().filter(|ty| ty.has_mma()) {
            mma.insert(
                ty,
                MmaKernels {
                    mma: function(&ty.mma_kernel())?,
                    mma_id: function(&ty.mma_id_kernel())?,
                },
            );
        }
        Ok(Self {
            fixed,
            weights,
            q8_1,
            mma,
        })
    }

    /// The function of a kernel reference. Every [`KernelRef`] the step builder makes names
    /// a loaded kernel (fixed names are checked against the sources by the tests).
    pub fn resolve(&self, kernel: KernelRef) -> &CudaFunction {
        match kernel {
            KernelRef::Fixed(name) => &self.fixed[name],
            KernelRef::Matvec(ty) => &self.weights[&ty].matvec,
            KernelRef::Matmul(ty) => &self.weights[&ty].matmul,
            KernelRef::MatvecById(ty) => &self.weights[&ty].matvec_id,
            KernelRef::MatmulById(ty) => &self.weights[&ty].matmul_id,
            KernelRef::GetRows(ty) => &self.weights[&ty].get_rows,
            KernelRef::MatvecQ8_1(ty) => &self.q8_1[&ty].matvec,
            KernelRef::MatvecBatchQ8_1(ty) => &self.q8_1[&ty].batch,
            KernelRef::Mma(ty) => &self.mma[&ty].mma,
            KernelRef::MmaById(ty) => &self.mma[&ty].mma_id,
        }
    }
}
