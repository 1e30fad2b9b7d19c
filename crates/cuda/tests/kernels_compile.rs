//! The kernel program compiles with NVRTC for the GPU generations rinfer targets. Needs
//! libnvrtc (no GPU): run with
//! `LD_LIBRARY_PATH=<nvrtc lib dir> cargo test -p rinfer-cuda --features cuda -- --ignored`.
#![cfg(feature = "cuda")]

use rinfer_cuda::{CudaError, compile_kernels};

#[test]
#[ignore = "needs libnvrtc on LD_LIBRARY_PATH"]
fn kernels_compile_for_ampere_ada_and_hopper() {
    for arch in [(8, 0), (8, 6), (8, 9), (9, 0)] {
        match compile_kernels(arch) {
            Ok(cubin) => assert!(cubin.len() > 1000, "sm_{}{}: empty CUBIN", arch.0, arch.1),
            Err(error) => panic!("{error}"),
        }
    }
}

#[test]
fn missing_nvrtc_is_an_error_not_a_panic() {
    match compile_kernels((9, 0)) {
        Ok(_) => {}
        Err(CudaError::NoNvrtc { searched }) => assert!(searched.contains("nvrtc")),
        Err(other) => panic!("unexpected error: {other}"),
    }
}
