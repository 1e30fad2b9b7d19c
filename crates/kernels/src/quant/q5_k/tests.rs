use proptest::prelude::*;

use super::*;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_llama_cpp_bit_exact() {
    check_dequant_fixtures::<BlockQ5K>("Q5_K", true);
}

#[test]
fn quantize_matches_ggml_reference_bit_exact() {
    check_quantize_fixture::<BlockQ5K>("Q5_K");
}

/// `sum |dmin * m_j| * |a_i|`: the min terms cancel against the scaled codes, so rounding
/// scales with them rather than with the (possibly small) dequantized weights.
fn min_magnitude(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let a = dequantize(a);
    let mut sum = 0.0f64;
    for (b, a) in w.iter().zip(a.chunks_exact(256)) {
        for (j, a) in a.chunks_exact(32).enumerate() {
            let (_, m) = crate::quant::util::scale_min_k4(j, &b.scales);
            let mins = (b.dmin.to_f32() * m as f32).abs() as f64;
            sum += mins * a.iter().map(|v| v.abs() as f64).sum::<f64>();
        }
    }
    sum as f32
}

fn case() -> impl Strategy<Value = (Vec<BlockQ5K>, Vec<f32>)> {
    dot_case::<BlockQ5K>(|b, d, m| {
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
            assert_dot_close(simd, BlockQ5K::vec_dot(&w, &a), magnitude);
        }
    }
}
