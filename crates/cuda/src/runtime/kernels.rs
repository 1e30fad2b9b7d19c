//! The compiled kernel modules and their functions, looked up once at load: the common module
//! and those of the model's weight formats ([`crate::kernels::modules`]), each a CUDA module of
//! its own.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::cubin_cache::{CubinCache, CubinOrigin};
use crate::error::CudaError;
use crate::kernels::{FIXED_KERNELS, GpuType, KernelModule, kv_kernel_names};
use crate::program::KernelRef;
use crate::runtime::driver::driver;
use crate::runtime::modules::compile_modules;
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

/// Every loaded kernel, by name.
pub(crate) struct Kernels {
    fixed: HashMap<&'static str, CudaFunction>,
    weights: HashMap<GpuType, WeightKernels>,
    q8_1: HashMap<GpuType, Q8_1Kernels>,
    mma: HashMap<GpuType, MmaKernels>,
    /// The modules loaded, by name (`common, q4_k, q6_k`).
    loaded: String,
    /// How the modules were obtained, for `--verbose`.
    report: String,
}

impl Kernels {
    /// Compiles with `nvrtc` for the device's architecture the common module and those of
    /// `types` (or reads them from the cache in `cache`), and loads their kernels.
    pub fn load(
        ctx: &Arc<CudaContext>,
        nvrtc: &Nvrtc,
        arch: (u32, u32),
        types: impl IntoIterator<Item = GpuType>,
        cache: Option<&Path>,
    ) -> Result<Self, CudaError> {
        let start = Instant::now();
        let modules = KernelModule::for_types(types);
        let cache = cache.map(CubinCache::new);
        let compiled = compile_modules(nvrtc, arch, &modules, cache.as_ref())?;
        let names: Vec<&str> = modules.iter().map(|m| m.name()).collect();
        let mut kernels = Self {
            fixed: HashMap::new(),
            weights: HashMap::new(),
            q8_1: HashMap::new(),
            mma: HashMap::new(),
            loaded: names.join(", "),
            report: String::new(),
        };
        let mut from_cache = 0;
        for c in compiled {
            let loaded = match ctx.load_module(Ptx::from_binary(c.cubin)) {
                Ok(module) => {
                    from_cache += usize::from(c.origin == CubinOrigin::Cached);
                    module
                }
                // A cached CUBIN the driver refuses is compiled again and its entry replaced.
                Err(_) if c.origin == CubinOrigin::Cached => {
                    let cubin = match &cache {
                        Some(cache) => cache.recompile(&c.key, || nvrtc.compile(&c.source, arch)),
                        None => nvrtc.compile(&c.source, arch),
                    }?;
                    ctx.load_module(Ptx::from_binary(cubin))
                        .map_err(driver("module load"))?
                }
                Err(error) => return Err(driver("module load")(error)),
            };
            kernels.add(c.module, &loaded)?;
        }
        let compiled = modules.len() - from_cache;
        let cached = match &cache {
            Some(cache) => format!(", {from_cache} from the cache {}", cache.dir().display()),
            None => String::new(),
        };
        kernels.report = format!(
            "kernel modules {}: {compiled} compiled{cached} in {:.1} s",
            kernels.loaded,
            start.elapsed().as_secs_f64()
        );
        Ok(kernels)
    }

    /// How the modules were obtained: which, how many compiled and from the cache, how long.
    pub fn report(&self) -> &str {
        &self.report
    }

    /// Looks up the kernels of `module` in its loaded CUDA module.
    fn add(&mut self, module: KernelModule, loaded: &Arc<CudaModule>) -> Result<(), CudaError> {
        let function = |name: &str| loaded.load_function(name).map_err(driver("kernel lookup"));
        match module {
            KernelModule::Common => {
                for name in FIXED_KERNELS.iter().copied().chain(kv_kernel_names()) {
                    self.fixed.insert(name, function(name)?);
                }
            }
            KernelModule::Weights(ty) => {
                let weights = WeightKernels {
                    matvec: function(&ty.matvec_kernel())?,
                    matmul: function(&ty.matmul_kernel())?,
                    matvec_id: function(&ty.matvec_id_kernel())?,
                    matmul_id: function(&ty.matmul_id_kernel())?,
                    get_rows: function(&ty.get_rows_kernel())?,
                };
                self.weights.insert(ty, weights);
                if ty.has_q8_1_matvec() {
                    let q8_1 = Q8_1Kernels {
                        matvec: function(&ty.matvec_q8_1_kernel())?,
                        batch: function(&ty.matvec_batch_q8_1_kernel())?,
                    };
                    self.q8_1.insert(ty, q8_1);
                }
                if ty.has_mma() {
                    let mma = MmaKernels {
                        mma: function(&ty.mma_kernel())?,
                        mma_id: function(&ty.mma_id_kernel())?,
                    };
                    self.mma.insert(ty, mma);
                }
            }
        }
        Ok(())
    }

    /// The function of a kernel reference; an error if its module was not loaded (the step
    /// builder only asks for the formats of the model's weights, whose modules are).
    pub fn resolve(&self, kernel: KernelRef) -> Result<&CudaFunction, CudaError> {
        let found = match kernel {
            KernelRef::Fixed(name) => self.fixed.get(name),
            KernelRef::Matvec(ty) => self.weights.get(&ty).map(|k| &k.matvec),
            KernelRef::Matmul(ty) => self.weights.get(&ty).map(|k| &k.matmul),
            KernelRef::MatvecById(ty) => self.weights.get(&ty).map(|k| &k.matvec_id),
            KernelRef::MatmulById(ty) => self.weights.get(&ty).map(|k| &k.matmul_id),
            KernelRef::GetRows(ty) => self.weights.get(&ty).map(|k| &k.get_rows),
            KernelRef::MatvecQ8_1(ty) => self.q8_1.get(&ty).map(|k| &k.matvec),
            KernelRef::MatvecBatchQ8_1(ty) => self.q8_1.get(&ty).map(|k| &k.batch),
            KernelRef::Mma(ty) => self.mma.get(&ty).map(|k| &k.mma),
            KernelRef::MmaById(ty) => self.mma.get(&ty).map(|k| &k.mma_id),
        };
        found.ok_or_else(|| CudaError::KernelNotLoaded {
            kernel: format!("{kernel:?}"),
            loaded: self.loaded.clone(),
        })
    }
}
