//! Inputs shared by rinfer's criterion benchmarks (`cargo bench -p rinfer-benches`): weight
//! matrices of each packed type quantized as the model's are, deterministic activations, and
//! the default model's path.
//!
//! The benchmarks themselves live in `benches/`: `kernels` (matvec and matmul per packed type),
//! `model` (a decode step and a 128-token prefill of the default model) and `tokenizer`
//! (encoding a paragraph).

use std::path::PathBuf;

use rinfer_formats::GgmlType;
use rinfer_kernels::KernelError;

/// The weight types the model packs for AVX-512 VNNI (the Q4_K_M mix: Q4_K and Q6_K layers,
/// Q5_0 and Q8_0 where a file uses them), the ones whose products decide decode and prefill.
pub const PACKED_TYPES: [GgmlType; 4] =
    [GgmlType::Q4K, GgmlType::Q5_0, GgmlType::Q6K, GgmlType::Q8_0];

/// The environment variable naming the default model (Gemma 3 270M Q4_K_M), as for the tests.
pub const MODEL_VAR: &str = "RINFER_TEST_MODEL";

/// Deterministic values in `-1..1` (a 64-bit LCG: benchmarks need variety, not quality).
///
/// ```
/// let a = rinfer_benches::values(4, 7);
/// assert_eq!(a, rinfer_benches::values(4, 7));
/// assert!(a.iter().all(|v| (-1.0..1.0).contains(v)));
/// ```
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005) ^ 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// A `rows × cols` matrix of `ty` quantized from [`values`] scaled like trained weights, in
/// `u64` storage so that the bytes are aligned for every block type (view them with
/// [`matrix_bytes`]).
///
/// # Errors
/// When `ty` has no quantizer or `cols` is not a whole number of its blocks.
pub fn random_matrix(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    seed: u64,
) -> Result<Vec<u64>, KernelError> {
    if !cols.is_multiple_of(ty.block_size()) {
        return Err(KernelError::PartialBlock {
            ty,
            len: cols,
            unit: "elements",
        });
    }
    let row_bytes = cols / ty.block_size() * ty.type_size();
    let mut words = vec![0u64; (rows * row_bytes).div_ceil(8)];
    let bytes = &mut bytemuck::cast_slice_mut(&mut words)[..rows * row_bytes];
    let x: Vec<f32> = values(rows * cols, seed).iter().map(|v| v * 0.05).collect();
    for (out, x) in bytes
        .chunks_exact_mut(row_bytes.max(1))
        .zip(x.chunks_exact(cols.max(1)))
    {
        rinfer_kernels::quantize_row(ty, x, out)?;
    }
    Ok(words)
}

/// The bytes of a `rows × cols` matrix of `ty` made by [`random_matrix`].
pub fn matrix_bytes(words: &[u64], ty: GgmlType, rows: usize, cols: usize) -> &[u8] {
    let len = rows * (cols / ty.block_size() * ty.type_size());
    &bytemuck::cast_slice(words)[..len]
}

/// The default model's path from [`MODEL_VAR`], or `None` (after saying so on stderr) when it
/// is unset or names no file: the model benchmarks are then skipped.
pub fn default_model() -> Option<PathBuf> {
    match std::env::var_os(MODEL_VAR).map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        Some(path) => {
            eprintln!(
                "{MODEL_VAR}={} names no file: skipping the model benchmarks",
                path.display()
            );
            None
        }
        None => {
            eprintln!(
                "{MODEL_VAR} is unset: skipping the model benchmarks (set it to the path \
                 `rinfer fetch` prints)"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_matrices_are_whole_blocks_of_their_type() {
        assert!(matches!(
            random_matrix(GgmlType::Q4K, 2, 640, 0),
            Err(KernelError::PartialBlock { .. })
        ));
        let words = random_matrix(GgmlType::Q4K, 2, 512, 0).unwrap();
        let bytes = matrix_bytes(&words, GgmlType::Q4K, 2, 512);
        assert_eq!(bytes.len(), 2 * 2 * GgmlType::Q4K.type_size());
        let mut row = vec![0.0; 512];
        rinfer_kernels::dequantize_row(GgmlType::Q4K, &bytes[..bytes.len() / 2], &mut row).unwrap();
        assert!(row.iter().any(|&v| v != 0.0) && row.iter().all(|v| v.abs() < 0.1));
    }
}
