//! Every CUDA kernel, run on the host through a small CUDA emulation (`tests/host/
//! cuda_emulation.h`: a std::thread per CUDA thread, barriers for `__syncthreads` and warp
//! shuffles), agrees with a naive double-precision reference: matvec, batched matmul and
//! embedding lookup for all 14 weight formats (bias, strides, partial token groups), and the
//! mixture-of-experts matvec by expert id (stacked experts and their biases), the quantized
//! formats' tensor-core matmul and its by-expert-id variant (against a reference rounding
//! weights and activations to bf16 as they do; partial row, token and column tiles), RMSNorm,
//! LayerNorm, per-head norm, both RoPE layouts with partial rotation and frequency factors,
//! KV-cache writes, split-K decode attention and tiled prefill attention (GQA, MQA, sliding
//! windows over ring slots, soft-capping, head sizes 64 to 256 and 80), gated activations,
//! residual adds, soft-capping, argmax with ties, expert routing (both gatings, ties to the
//! lower id) and the weighted sum of the routed experts. It executes the very sources NVRTC
//! compiles; what it cannot show is GPU-specific behaviour (memory model, timing, real warps).

use std::path::Path;
use std::process::Command;

#[test]
fn cuda_kernels_match_naive_references_under_host_emulation() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_checks");
    std::fs::create_dir_all(&dir).expect("create the build folder");
    let exe = dir.join("kernel_checks");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/host/kernel_checks.cpp");
    let status = Command::new("c++")
        .args(["-std=c++20", "-O1", "-w", "-o"])
        .arg(&exe)
        .arg(&source)
        .status()
        .expect("a host C++ compiler (`c++`) is needed to check the CUDA kernels");
    assert!(status.success(), "compiling {} failed", source.display());
    let out = Command::new(&exe).output().expect("run the kernel checks");
    let report = String::from_utf8_lossy(&out.stdout);
    print!("{report}");
    assert!(out.status.success(), "{report}");
    assert!(report.contains(" passed, 0 failed"), "{report}");
}
