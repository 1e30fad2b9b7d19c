use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_llama_cpp_bit_exact() {
    check_dequant_fixtures::<BlockQ4_1>("Q4_1", true);
}

#[test]
fn quantize_matches_ggml_reference_bit_exact() {
    check_quantize_fixture::<BlockQ4_1>("Q4_1");
}

/// `sum |d_w d_a| * |q_w| * |q_a| + |m * s|` over blocks: the scale of the rounding of both the
/// code sums and the min terms, which the SIMD kernel adds in another order.
fn affine_magnitude(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32 {
    let mut sum = 0.0f64;
    for (x, y) in w.iter().zip(a) {
        let mut codes = [0.0f32; 32];
        BlockQ4_1 {
            d: half::f16::ONE,
            m: half::f16::ZERO,
            ..*x
        }
        .dequantize(&mut codes);
        let d = (x.d.to_f32() as f64 * y.d.to_f32() as f64).abs();
        let q: f64 = codes
            .iter()
            .zip(&y.qs)
            .map(|(c, &v)| (*c as f64 * v as f64).abs())
            .sum();
        sum += d * q + (x.m.to_f32() as f64 * y.s.to_f32() as f64).abs();
    }
    sum as f32
}

fn case() -> impl Strategy<Value = (Vec<BlockQ4_1>, Vec<f32>)> {
    dot_case::<BlockQ4_1>(|b, d, m| {
        b.d = d;
        b.m = m;
    })
}

proptest! {
    // Q8_1 carries its own rounded sum `s` (which stays non-zero even when the f16 scale
    // underflows), so the exact value pairs the min with `s` just as ggml's dot product does;
    // the scaled codes are checked against the dequantized weights.
    #[test]
    fn reference_dot_matches_dequantized_dot((w, x) in case()) {
        let a = quantize::<BlockQ8_1>(&x);
        // `s` is an f16: activations whose code sum times scale passes 65504 overflow it, in
        // ggml too. That is a limit of the format, not something this test can check.
        prop_assume!(a.iter().all(|b| b.s.is_finite()));
        let (dw, da) = (dequantize(&w), dequantize(&a));
        let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
        for ((b, ab), (wv, av)) in w.iter().zip(&a).zip(dw.chunks(32).zip(da.chunks(32))) {
            let (m, s) = (b.m.to_f32() as f64, ab.s.to_f32() as f64);
            for (&wi, &ai) in wv.iter().zip(av) {
                exact += (wi as f64 - m) * ai as f64;
                magnitude += (wi as f64 - m).abs() * (ai as f64).abs() + m.abs() * (ai as f64).abs();
            }
            exact += m * s;
            magnitude += (m * s).abs();
        }
        let got = BlockQ4_1::vec_dot(&w, &a) as f64;
        prop_assert!((got - exact).abs() <= 1e-4 * magnitude + 1e-30, "{got} vs {exact}");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_dot_matches_reference((w, x) in case()) {
        if has_avx2() {
            let a = quantize::<BlockQ8_1>(&x);
            prop_assume!(a.iter().all(|b| b.s.is_finite()));
            // SAFETY: AVX2, FMA and F16C were detected just above.
            let simd = unsafe { x86::vec_dot(&w, &a) };
            assert_dot_close(simd, BlockQ4_1::vec_dot(&w, &a), affine_magnitude(&w, &a));
        }
    }
}
