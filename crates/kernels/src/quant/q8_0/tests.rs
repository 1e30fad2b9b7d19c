use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_llama_cpp_bit_exact() {
    check_dequant_fixtures::<BlockQ8_0>("Q8_0", true);
}

#[test]
fn quantize_matches_ggml_reference_bit_exact() {
    check_quantize_fixture::<BlockQ8_0>("Q8_0");
}

#[test]
fn activation_quantize_matches_ggml_cpu_backend() {
    let x = fixture_f32("act_Q8_0.input.f32");
    let got = quantize::<BlockQ8_0>(&x);
    assert_eq!(
        bytemuck::cast_slice::<_, u8>(&got),
        fixture("act_Q8_0.cpu.bin")
    );
}

fn case() -> impl Strategy<Value = (Vec<BlockQ8_0>, Vec<f32>)> {
    dot_case::<BlockQ8_0>(|b, d, _| b.d = d)
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
            assert_dot_close(simd, BlockQ8_0::vec_dot(&w, &a), dot_magnitude(&w, &a));
        }
    }
}
