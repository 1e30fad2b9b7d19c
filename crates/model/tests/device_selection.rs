//! `--device cpu|cuda|auto`: `cuda` fails loudly, `auto` falls back to the CPU with the reason,
//! `cpu` never touches the GPU, and the chosen device is always reportable.

use rinfer_cuda::{CudaError, GpuInfo};
use rinfer_model::engine::{DeviceReport, DeviceRequest, Resolved, resolve};

fn no_driver() -> Result<GpuInfo, CudaError> {
    Err(CudaError::NoDriver {
        searched: "libcuda.so".into(),
    })
}

fn h100() -> Result<GpuInfo, CudaError> {
    Ok(GpuInfo {
        ordinal: 0,
        name: "NVIDIA H100".into(),
        compute_capability: (9, 0),
        total_memory: 80 << 30,
        nvrtc: None,
    })
}

#[test]
fn the_device_option_parses() {
    assert_eq!("cpu".parse(), Ok(DeviceRequest::Cpu));
    assert_eq!("cuda".parse(), Ok(DeviceRequest::Cuda));
    assert_eq!("auto".parse(), Ok(DeviceRequest::Auto));
    assert!(
        "tpu"
            .parse::<DeviceRequest>()
            .unwrap_err()
            .contains("cpu, cuda or auto")
    );
    assert_eq!(DeviceRequest::default(), DeviceRequest::Auto);
}

#[test]
fn cuda_without_a_driver_is_a_clear_error() {
    let error = resolve(DeviceRequest::Cuda, no_driver)
        .err()
        .expect("an error");
    let message = error.to_string();
    assert!(message.contains("no CUDA driver found"), "{message}");
    assert!(message.contains("--device cpu"), "{message}");
}

#[test]
fn auto_without_a_driver_runs_on_the_cpu_and_says_why() {
    match resolve(DeviceRequest::Auto, no_driver).unwrap() {
        Resolved::Cpu { reason } => {
            assert!(reason.contains("no CUDA driver found"), "{reason}");
            let report = DeviceReport::Cpu { reason };
            assert_eq!(report.kind(), "cpu");
            assert!(report.to_string().starts_with("cpu (no usable CUDA device"));
        }
        Resolved::Cuda(_) => panic!("no GPU here"),
    }
}

#[test]
fn cpu_never_loads_and_gpus_are_reported_with_their_name() {
    let mut called = false;
    let chosen = resolve(DeviceRequest::Cpu, || {
        called = true;
        h100()
    })
    .unwrap();
    assert!(matches!(chosen, Resolved::Cpu { .. }) && !called);
    match resolve(DeviceRequest::Auto, h100).unwrap() {
        Resolved::Cuda(info) => {
            let report = DeviceReport::Cuda(info);
            assert_eq!(report.kind(), "cuda");
            assert_eq!(report.to_string(), "cuda:0 (NVIDIA H100, sm_90, 81920 MiB)");
        }
        Resolved::Cpu { reason } => panic!("{reason}"),
    }
}
