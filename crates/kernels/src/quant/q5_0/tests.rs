use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_llama_cpp_bit_exact() {
    check_dequant_fixtures::<BlockQ5_0>("Q5_0", true);
}

#[test]
fn quantize_matches_ggml_reference_bit_exact() {
    check_quantize_fixture::<BlockQ5_0>("Q5_0");
}

fn case() -> impl Strategy<Value = (Vec<BlockQ5_0>, Vec<f32>)> {
    dot_case::<BlockQ5_0>(|b, d, _| b.d = d)
}

proptest! {
    #[test]
    fn reference_dot_matches_dequantized_dot((w, x) in case()) {
        assert_reference_dot(&w, &quantize::<BlockQ8_0>(&x), 0.0);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_dot_matches_reference((w, x) in case()) {
        if has_avx2() {
            let a = quantize::<BlockQ8_0>(&x);
            // SAFETY: AVX2, FMA and F16C were detected just above.
            let simd = unsafe { x86::vec_dot(&w, &a) };
            assert_dot_close(simd, BlockQ5_0::vec_dot(&w, &a), dot_magnitude(&w, &a));
        }
    }
}
