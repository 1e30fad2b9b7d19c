//! Every CUDA kernel, run on the host through a small CUDA emulation (`tests/host/
//! cuda_emulation.h`: a std::thread per CUDA thread, barriers for `__syncthreads` and warp
//! shuffles), agrees with a naive double-precision reference: matvec, batched matmul and
//! embedding lookup for all 25 weight formats (bias, strides, partial token groups), and the
//! mixture-of-experts matvec by expert id (stacked experts and their biases), the quantized
//! formats' tensor-core matmul and its by-expert-id variant (against a reference rounding
//! weights and activations to bf16 as they do; partial row, token and column tiles), RMSNorm,
//! LayerNorm, per-head norm, both RoPE layouts with partial rotation and frequency factors,
//! KV-cache writes, split-K decode attention over f32 and f16 caches, prefill attention in f32
//! tiles over an f32 cache and on f16 tensor cores over an f16 one (GQA, MQA, sliding windows
//! over ring slots, soft-capping, sinks, head sizes 36, 64, 80, 128 and 256;
//! `attention_checks.cpp`), gated activations,
//! residual adds, soft-capping, argmax with ties, expert routing (both gatings, ties to the
//! lower id) and the weighted sum of the routed experts. It executes the very sources NVRTC
//! compiles; what it cannot show is GPU-specific behaviour (memory model, timing, real warps).

use std::path::Path;
use std::process::Command;

/// Compiles `tests/host/{program}.cpp` for the host, runs it and requires its checks to pass.
fn run_host_checks(program: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(program);
    std::fs::create_dir_all(&dir).expect("create the build folder");
    let exe = dir.join(program);
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/host/{program}.cpp"));
    rinfer_cuda::kernels::codebooks::write_host_headers(&dir).expect("write the code tables");
    let status = Command::new("c++")
        .args(["-std=c++20", "-O1", "-w", "-I"])
        .arg(&dir)
        .arg("-o")
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

#[test]
fn cuda_kernels_match_naive_references_under_host_emulation() {
    run_host_checks("kernel_checks");
}

/// The KV-cache writes and the attention kernels over f32, f16 and q8_0 caches (`attention_checks.
/// cpp`): every store writes the reference's bytes (f16 rounded to nearest even as `_Float16`
/// does, q8_0 blocks quantized by ggml's rule), and attention matches the naive reference over
/// the same rounded keys and values.
#[test]
fn attention_kernels_match_naive_references_for_every_cache_type() {
    run_host_checks("attention_checks");
}
