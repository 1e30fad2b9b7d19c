//! The CUDA kernels' dequantization (`src/kernels/dequant.cuh`, the code every matvec, matmul
//! and embedding kernel reads weights through) reproduces `rinfer-kernels`' scalar reference
//! bit for bit, for every GPU weight format, on quantized, random and all-zero and all-one
//! blocks. The headers are plain C++ apart from three CUDA keywords, so they are compiled here
//! with the host's `c++`, with the i-quants' code tables generated as the program assembles them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rinfer_cuda::kernels::GpuType;

/// Elements per test row: two K-quant super-blocks.
const ROW: usize = 512;

fn build_driver() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dequant_driver");
    std::fs::create_dir_all(&dir).expect("create the build folder");
    let exe = dir.join("dequant_driver");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/host/dequant_driver.cpp");
    rinfer_cuda::kernels::codebooks::write_host_headers(&dir).expect("write the code tables");
    let status = Command::new("c++")
        .args(["-std=c++17", "-O1", "-I"])
        .arg(&dir)
        .arg("-o")
        .arg(&exe)
        .arg(&source)
        .status()
        .expect("a host C++ compiler (`c++`) is needed to check the CUDA dequantization code");
    assert!(status.success(), "compiling {} failed", source.display());
    exe
}

fn gpu_dequantize(exe: &Path, ty: GpuType, row: &[u8]) -> Vec<f32> {
    let mut child = Command::new(exe)
        .args([ty.suffix(), &(ROW / 32).to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the driver");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(row)
        .expect("write the row");
    let out = child.wait_with_output().expect("driver output");
    assert!(out.status.success(), "driver failed for {ty:?}");
    out.stdout
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn rows_for(ty: GpuType, rng: &mut StdRng) -> Vec<Vec<u8>> {
    let bytes = ROW / ty.ggml().block_size() * ty.ggml().type_size();
    let mut rows = Vec::new();
    let values: Vec<f32> = (0..ROW).map(|_| rng.random_range(-2.0f32..2.0)).collect();
    let mut quantized = vec![0u8; bytes];
    if rinfer_kernels::quantize_row(ty.ggml(), &values, &mut quantized).is_ok() {
        rows.push(quantized);
    }
    for _ in 0..3 {
        rows.push((0..bytes).map(|_| rng.random()).collect());
    }
    // Edge blocks: every bit clear (zero scales, the first grid entries), every bit set (NaN
    // f16 scales, the last entries and all signs).
    rows.push(vec![0x00; bytes]);
    rows.push(vec![0xff; bytes]);
    rows
}

#[test]
fn cuda_dequantization_matches_the_cpu_reference() {
    let exe = build_driver();
    let mut rng = StdRng::seed_from_u64(7);
    for ty in GpuType::ALL {
        for (case, row) in rows_for(ty, &mut rng).iter().enumerate() {
            let mut expected = vec![0.0f32; ROW];
            rinfer_kernels::dequantize_row(ty.ggml(), row, &mut expected)
                .expect("the CPU reference dequantizes every GPU format");
            let got = gpu_dequantize(&exe, ty, row);
            assert_eq!(got.len(), ROW, "{ty:?}");
            for (i, (&g, &e)) in got.iter().zip(&expected).enumerate() {
                assert!(same(g, e), "{ty:?} row {case} element {i}: gpu {g} cpu {e}");
            }
        }
    }
}
