use rinfer_formats::GgmlType;

use super::*;
use crate::cpu::Isa;
use crate::matmul::matmul;
use crate::parallel::rows_per_task;
use crate::registry;

/// Deterministic values in `-1..1` (a small LCG; tests need variety, not quality).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

/// A `rows × cols` matrix of `ty`, quantized from deterministic values, in u64 storage so the
/// bytes are aligned for every block type.
fn matrix(ty: GgmlType, rows: usize, cols: usize) -> Vec<u64> {
    let row_bytes = cols / ty.block_size() * ty.type_size();
    let mut words = vec![0u64; (rows * row_bytes).div_ceil(8)];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    let x = values(rows * cols, ty.id() as u64);
    for (out, x) in bytes[..rows * row_bytes]
        .chunks_exact_mut(row_bytes)
        .zip(x.chunks_exact(cols))
    {
        crate::quantize_row(ty, x, out).expect("quantize");
    }
    words
}

fn as_bytes(words: &[u64], ty: GgmlType, rows: usize, cols: usize) -> &[u8] {
    let len = rows * cols / ty.block_size() * ty.type_size();
    &bytemuck::cast_slice(words)[..len]
}

/// Weight types with a quantizer, so the tests can build matrices of them.
fn types() -> Vec<GgmlType> {
    registry::all()
        .filter(|t| t.weight.is_some() && t.quantize.is_some())
        .map(|t| t.ty)
        .collect()
}

#[test]
fn the_tests_cover_the_float_and_quantized_weight_types() {
    let types = types();
    for ty in [
        GgmlType::F32,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q5_0,
        GgmlType::Q6K,
    ] {
        assert!(types.contains(&ty), "{ty}");
    }
}

fn run_matvec(kernels: &Kernels, ty: GgmlType, rows: usize, cols: usize) -> Vec<f32> {
    let data = matrix(ty, rows, cols);
    let w = WeightMatrix::new(ty, rows, cols, as_bytes(&data, ty, rows, cols)).expect("matrix");
    let x = values(cols, 7);
    let mut act = ActivationBuffer::for_matvec(cols);
    let mut y = vec![0.0; rows];
    matvec(kernels, &w, &x, &mut act, &mut y).expect("matvec");
    y
}

#[test]
fn matvec_matches_dequantized_f64_product() {
    for ty in types() {
        let (rows, cols) = (37, 512);
        let data = matrix(ty, rows, cols);
        let bytes = as_bytes(&data, ty, rows, cols);
        let y = run_matvec(Kernels::detected(), ty, rows, cols);
        let x = values(cols, 7);
        let mut wr = vec![0.0; cols];
        for (r, (&got, row)) in y
            .iter()
            .zip(bytes.chunks_exact(bytes.len() / rows))
            .enumerate()
        {
            crate::dequantize_row(ty, row, &mut wr).expect("dequantize");
            let exact: f64 = wr.iter().zip(&x).map(|(&a, &b)| a as f64 * b as f64).sum();
            let magnitude: f64 = wr
                .iter()
                .zip(&x)
                .map(|(&a, &b)| (a as f64 * b as f64).abs())
                .sum();
            // Activation quantization (8 bits per value) dominates the error budget.
            assert!(
                (got as f64 - exact).abs() <= 2e-2 * magnitude,
                "{ty} row {r}: {got} vs {exact}"
            );
        }
    }
}

#[test]
fn detected_and_scalar_tables_agree() {
    for ty in types() {
        let simd = run_matvec(Kernels::detected(), ty, 19, 768);
        let scalar = run_matvec(&Kernels::scalar(), ty, 19, 768);
        for (a, b) in simd.iter().zip(&scalar) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{ty}: {a} vs {b}");
        }
    }
}

#[test]
fn matvec_is_bit_identical_on_one_and_two_threads() {
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .expect("pool")
    };
    // Large enough that two threads split the rows into several tasks for every type.
    let (rows, cols) = (1003, 1024);
    for ty in types() {
        let row_bytes = cols / ty.block_size() * ty.type_size();
        assert!(pool(2).install(|| rows_per_task(rows, row_bytes)) < rows / 2);
        let one = pool(1).install(|| run_matvec(Kernels::detected(), ty, rows, cols));
        let two = pool(2).install(|| run_matvec(Kernels::detected(), ty, rows, cols));
        assert_eq!(
            bytemuck::cast_slice::<f32, u32>(&one),
            bytemuck::cast_slice::<f32, u32>(&two),
            "{ty}"
        );
    }
}

#[test]
fn matmul_rows_are_bit_identical_to_matvec() {
    // Every instruction set this CPU has, so each tile kernel meets the dot it must equal.
    for &isa in Isa::ALL {
        matmul_matches_matvec(&Kernels::with_isa(isa));
    }
}

fn matmul_matches_matvec(k: &Kernels) {
    let (rows, cols, n_tokens) = (45, 512, 11);
    for ty in types() {
        let data = matrix(ty, rows, cols);
        let w = WeightMatrix::new(ty, rows, cols, as_bytes(&data, ty, rows, cols)).expect("matrix");
        let x = values(n_tokens * cols, 3);
        let mut act = ActivationBuffer::for_matmul(n_tokens, cols, rows);
        let mut y = vec![0.0; n_tokens * rows];
        matmul(k, &w, &x, n_tokens, &mut act, &mut y).expect("matmul");
        let mut yt = vec![0.0; rows];
        for t in 0..n_tokens {
            matvec(k, &w, &x[t * cols..(t + 1) * cols], &mut act, &mut yt).expect("matvec");
            let got = &y[t * rows..(t + 1) * rows];
            assert_eq!(
                bytemuck::cast_slice::<f32, u32>(got),
                bytemuck::cast_slice::<f32, u32>(&yt),
                "{ty} token {t} on {:?}",
                k.isa()
            );
        }
    }
}

#[test]
fn drivers_reject_bad_shapes_at_the_boundary() {
    let (rows, cols) = (4, 256);
    let data = matrix(GgmlType::Q4K, rows, cols);
    let bytes = as_bytes(&data, GgmlType::Q4K, rows, cols);
    assert!(matches!(
        WeightMatrix::new(GgmlType::Q4K, rows, 100, bytes),
        Err(KernelError::PartialBlock { .. })
    ));
    assert!(matches!(
        WeightMatrix::new(GgmlType::Q4K, rows + 1, cols, bytes),
        Err(KernelError::LengthMismatch { .. })
    ));
    let w = WeightMatrix::new(GgmlType::Q4K, rows, cols, bytes).expect("matrix");
    let k = Kernels::detected();
    let mut y = vec![0.0; rows];
    let mut small = ActivationBuffer::for_matvec(16);
    assert!(matches!(
        matvec(k, &w, &[0.0; 256], &mut small, &mut y),
        Err(KernelError::ScratchTooSmall { .. })
    ));
    let mut act = ActivationBuffer::for_matvec(cols);
    assert!(matches!(
        matvec(k, &w, &[0.0; 255], &mut act, &mut y),
        Err(KernelError::LengthMismatch { .. })
    ));
    assert!(matches!(
        matvec(k, &w, &[0.0; 256], &mut act, &mut y[..3]),
        Err(KernelError::LengthMismatch { .. })
    ));
    let iq = WeightMatrix::new(GgmlType::NVFP4, 1, 256, &[0u8; 144]).expect("matrix");
    assert!(matches!(
        matvec(k, &iq, &[0.0; 256], &mut act, &mut y[..1]),
        Err(KernelError::Unsupported { .. })
    ));
}
