//! The kernel program compiles with NVRTC for the GPU generations rinfer targets (Ampere,
//! Ada, Hopper). Needs NVRTC, not a GPU: the test finds it where the runtime looks without
//! environment variables (the toolkits, the system's Python wheels, then the system loader,
//! which honours `LD_LIBRARY_PATH`), and where none is installed it says so and
//! passes. `cargo xtask test` installs the `nvidia-cuda-nvrtc-cu12` wheel and requires the
//! compilation to have run.
#![cfg(feature = "cuda")]

use rinfer_cuda::nvrtc_search::NvrtcSearch;
use rinfer_cuda::{CudaError, Nvrtc, kernels::program_source};

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
    let source = program_source();
    for arch in [(8, 0), (8, 6), (8, 9), (9, 0)] {
        match nvrtc.compile(&source, arch) {
            Ok(cubin) => assert!(cubin.len() > 1000, "sm_{}{}: empty CUBIN", arch.0, arch.1),
            Err(error) => panic!("{nvrtc}: {error}"),
        }
        println!(
            "compiled the kernel program for sm_{}{} with {nvrtc}",
            arch.0, arch.1
        );
    }
}

#[test]
fn a_missing_nvrtc_file_is_an_error_not_a_panic() {
    let missing = std::path::Path::new("/nonexistent/libnvrtc.so.13");
    assert!(Nvrtc::open(missing).is_err());
}
