//! Asking the driver about GPU 0 on a machine without one is an error, never a panic.

use rinfer_cuda::CudaError;

#[test]
fn probing_without_a_gpu_does_not_panic() {
    match rinfer_cuda::probe(0) {
        Ok(info) => assert!(!info.name.is_empty()),
        Err(CudaError::NotBuilt | CudaError::NoDriver { .. } | CudaError::NoDevice { .. }) => {}
        Err(other) => panic!("unexpected error: {other}"),
    }
}
