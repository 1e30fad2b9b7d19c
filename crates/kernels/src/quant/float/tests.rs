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

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_tiles_are_bit_identical_to_their_dots(
        (w, a) in (0usize..200, 1usize..=8)
            .prop_flat_map(|(n, rows)| (activations(n), activations(n * rows)))
    ) {
        if has_avx2() {
            let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
            let wb: Vec<bf16> = w.iter().map(|&v| f32_to_bf16(v)).collect();
            let rows = if w.is_empty() { 1 } else { a.len() / w.len() };
            let (mut t32, mut t16, mut tb16) = (vec![0.0; rows], vec![0.0; rows], vec![0.0; rows]);
            // SAFETY: AVX2, FMA and F16C were detected just above.
            unsafe {
                x86::vec_dot_tile_f32(&w, &a, &mut t32);
                x86::vec_dot_tile_f16(&wh, &a, &mut t16);
                x86::vec_dot_tile_bf16(&wb, &a, &mut tb16);
            }
            for r in 0..rows {
                let ar = &a[r * w.len()..(r + 1) * w.len()];
                // SAFETY: as above.
                let dots = unsafe {
                    (x86::vec_dot_f32(&w, ar), x86::vec_dot_f16(&wh, ar), x86::vec_dot_bf16(&wb, ar))
                };
                assert_eq!(t32[r].to_bits(), dots.0.to_bits(), "f32 row {r}");
                assert_eq!(t16[r].to_bits(), dots.1.to_bits(), "f16 row {r}");
                assert_eq!(tb16[r].to_bits(), dots.2.to_bits(), "bf16 row {r}");
            }
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
