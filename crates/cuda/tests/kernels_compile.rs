//! The kernel program compiles with NVRTC for the GPU generations rinfer targets (Ampere,
//! Ada, Hopper): every module of it ([`KernelModule::all`]: the common one and one per weight
//! format), compiled on as many threads as the machine has (NVRTC compiles distinct programs
//! concurrently). Needs NVRTC, not a GPU: the test finds it where the runtime looks without
//! environment variables (the toolkits, the system's Python wheels, then the system loader,
//! which honours `LD_LIBRARY_PATH`), and where none is installed it says so and
//! passes. `cargo xtask test` installs the `nvidia-cuda-nvrtc-cu12` wheel and requires the
//! compilation to have run: one line `compiled the kernel program for sm_XY` per architecture.
#![cfg(feature = "cuda")]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rinfer_cuda::kernels::KernelModule;
use rinfer_cuda::nvrtc_search::NvrtcSearch;
use rinfer_cuda::{CudaError, Nvrtc};

const ARCHS: [(u32, u32); 4] = [(8, 0), (8, 6), (8, 9), (9, 0)];

#[test]
fn kernels_compile_for_ampere_ada_and_hopper() {
    let nvrtc = match Nvrtc::find(&NvrtcSearch::default(), None) {
        Ok(nvrtc) => nvrtc,
        Err(CudaError::NoNvrtc { searched }) => {
            println!("skipped: no NVRTC found (looked for {searched})");
            return;
        }
        Err(other) => panic!("unexpected error: {other}"),
    };
    let modules: Vec<(KernelModule, String)> = KernelModule::all()
        .into_iter()
        .map(|m| (m, m.source()))
        .collect();
    let jobs: Vec<(usize, &(KernelModule, String))> = (0..ARCHS.len())
        .flat_map(|a| modules.iter().map(move |m| (a, m)))
        .collect();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let compiled: Vec<AtomicUsize> = ARCHS.iter().map(|_| AtomicUsize::new(0)).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while let Some(&(a, (module, source))) =
                    jobs.get(next.fetch_add(1, Ordering::Relaxed))
                {
                    let arch = ARCHS[a];
                    match nvrtc.compile(source, arch) {
                        Ok(cubin) if cubin.len() > 1000 => {
                            compiled[a].fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(_) => failures.lock().unwrap().push(format!(
                            "sm_{}{} {}: empty CUBIN",
                            arch.0,
                            arch.1,
                            module.name()
                        )),
                        Err(error) => failures
                            .lock()
                            .unwrap()
                            .push(format!("{} {nvrtc}: {error}", module.name())),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for (arch, count) in ARCHS.iter().zip(&compiled) {
        assert_eq!(count.load(Ordering::Relaxed), modules.len());
        println!(
            "compiled the kernel program for sm_{}{} with {nvrtc} ({} modules)",
            arch.0,
            arch.1,
            modules.len()
        );
    }
}

#[test]
fn a_missing_nvrtc_file_is_an_error_not_a_panic() {
    let missing = std::path::Path::new("/nonexistent/libnvrtc.so.13");
    assert!(Nvrtc::open(missing).is_err());
}
