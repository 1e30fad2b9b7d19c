use half::{bf16, f16};
use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

#[test]
fn f16_dequantize_matches_llama_cpp_bit_exact() {
    check_dequant_fixtures::<f16>("F16", true);
}

#[test]
fn bf16_dequantize_matches_llama_cpp_bit_exact() {
    check_dequant_fixtures::<bf16>("BF16", true);
}

#[test]
fn f16_quantize_matches_ggml_bit_exact() {
    check_quantize_fixture::<f16>("F16");
}

#[test]
fn bf16_quantize_matches_ggml_bit_exact() {
    check_quantize_fixture::<bf16>("BF16");
}

fn row() -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    (0usize..200).prop_flat_map(|n| (activations(n), activations(n)))
}

proptest! {
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_dots_match_reference((w, a) in row()) {
        if has_avx2() {
            let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
            let wb: Vec<bf16> = w.iter().map(|&v| f32_to_bf16(v)).collect();
            // SAFETY: AVX2, FMA and F16C were detected just above.
            let (s32, s16, sb16) = unsafe {
                (x86::vec_dot_f32(&w, &a), x86::vec_dot_f16(&wh, &a), x86::vec_dot_bf16(&wb, &a))
            };
            assert_dot_close(s32, f32::vec_dot(&w, &a), dot_magnitude(&w, &a));
            assert_dot_close(s16, f16::vec_dot(&wh, &a), dot_magnitude(&wh, &a));
            assert_dot_close(sb16, bf16::vec_dot(&wb, &a), dot_magnitude(&wb, &a));
        }
    }

    #[cfg(target_arch = "aarch64")]
    #[test]
    fn neon_dots_match_reference((w, a) in row()) {
        let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
        let wb: Vec<bf16> = w.iter().map(|&v| f32_to_bf16(v)).collect();
        // SAFETY: every AArch64 CPU has NEON, all these kernels need.
        let (s32, s16, sb16) = unsafe {
            (
                aarch64::vec_dot_f32(&w, &a),
                aarch64::vec_dot_f16(&wh, &a),
                aarch64::vec_dot_bf16(&wb, &a),
            )
        };
        assert_dot_close(s32, f32::vec_dot(&w, &a), dot_magnitude(&w, &a));
        assert_dot_close(s16, f16::vec_dot(&wh, &a), dot_magnitude(&wh, &a));
        assert_dot_close(sb16, bf16::vec_dot(&wb, &a), dot_magnitude(&wb, &a));
    }
}
