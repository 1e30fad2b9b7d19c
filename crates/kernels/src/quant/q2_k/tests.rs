use super::*;
use crate::quant::testing::*;

/// `sum |dmin| * 15 * |a_i|`: a bound on the min terms (the 4-bit mins are at most 15).
fn min_terms_bound(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
    let a = dequantize(a);
    w.iter()
        .zip(a.chunks_exact(256))
        .map(|(b, a)| b.dmin.to_f32().abs() * 15.0 * a.iter().map(|v| v.abs()).sum::<f32>())
        .sum()
}

fixture_tests!(BlockQ2K, "Q2_K", dequantize, quantize);
dot_tests!(BlockQ2K, scales: [d, dmin], avx2: x86::vec_dot,
    min_terms: min_terms_bound,
    neon: aarch64,
);
