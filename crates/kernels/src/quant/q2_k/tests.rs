use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_llama_cpp_bit_exact() {
    check_dequant_fixtures::<BlockQ2K>("Q2_K", true);
}

/// `sum |dmin| * 15 * |a_i|`: a bound on the min terms, which cancel against the scaled codes,
/// so rounding scales with them rather than with the (possibly small) dequantized weights.
fn min_magnitude(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
    let a = dequantize(a);
    w.iter()
        .zip(a.chunks_exact(256))
        .map(|(b, a)| b.dmin.to_f32().abs() * 15.0 * a.iter().map(|v| v.abs()).sum::<f32>())
        .sum()
}

fn case() -> impl Strategy<Value = (Vec<BlockQ2K>, Vec<f32>)> {
    dot_case::<BlockQ2K>(|b, d, m| {
        b.d = d;
        b.dmin = m;
    })
}

proptest! {
    #[test]
    fn reference_dot_matches_dequantized_dot((w, x) in case()) {
        let a = quantize::<BlockQ8K>(&x);
        assert_reference_dot(&w, &a, min_magnitude(&w, &a));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_dot_matches_reference((w, x) in case()) {
        if has_avx2() {
            let a = quantize::<BlockQ8K>(&x);
            // SAFETY: AVX2, FMA and F16C were detected just above.
            let simd = unsafe { x86::vec_dot(&w, &a) };
            let magnitude = dot_magnitude(&w, &a) + 2.0 * min_magnitude(&w, &a);
            assert_dot_close(simd, BlockQ2K::vec_dot(&w, &a), magnitude);
        }
    }
}
