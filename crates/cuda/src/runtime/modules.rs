//! Compiling the kernel modules a model needs: several at once on threads (NVRTC compiles
//! distinct programs concurrently), each through the on-disk cache when there is one
//! ([`crate::cubin_cache`]).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cubin_cache::{CubinCache, CubinKey, CubinOrigin};
use crate::error::CudaError;
use crate::kernels::KernelModule;
use crate::runtime::nvrtc::Nvrtc;

/// One module's CUBIN and how it was obtained.
pub(crate) struct CompiledModule {
    /// The module.
    pub module: KernelModule,
    /// Its source, to compile it again if the driver refuses a cached CUBIN.
    pub source: String,
    /// Its cache key.
    pub key: CubinKey,
    /// The CUBIN.
    pub cubin: Vec<u8>,
    /// Whether it came from the cache.
    pub origin: CubinOrigin,
}

/// Compiles (or reads from `cache`) every one of `modules` for `arch`, on up to
/// `available_parallelism` threads; the results are in `modules`' order.
pub(crate) fn compile_modules(
    nvrtc: &Nvrtc,
    arch: (u32, u32),
    modules: &[KernelModule],
    cache: Option<&CubinCache>,
) -> Result<Vec<CompiledModule>, CudaError> {
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(modules.len())
        .max(1);
    let mut done: Vec<(usize, Result<CompiledModule, CudaError>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&module) = modules.get(i) else { break };
                        mine.push((i, compile_one(nvrtc, arch, module, cache)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, result)| result).collect()
}

/// One module, from the cache if it holds it intact.
fn compile_one(
    nvrtc: &Nvrtc,
    arch: (u32, u32),
    module: KernelModule,
    cache: Option<&CubinCache>,
) -> Result<CompiledModule, CudaError> {
    let source = module.source();
    let key = CubinKey::new(module.name(), &source, arch, nvrtc.version());
    let compile = || nvrtc.compile(&source, arch);
    let (cubin, origin) = match cache {
        Some(cache) => cache.get_or_compile(&key, compile)?,
        None => (compile()?, CubinOrigin::Compiled),
    };
    Ok(CompiledModule {
        module,
        source,
        key,
        cubin,
        origin,
    })
}
