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

proptest! {
    // Q8_1 carries its own rounded sum `s` (which stays non-zero even when the f16 scale
    // underflows), so the exact value pairs the min with `s` just as ggml's dot product does;
    // the scaled codes are checked against the dequantized weights.
    #[test]
    fn reference_dot_matches_dequantized_dot((w, x) in dot_case::<BlockQ4_1>(|b, d, m| { b.d = d; b.m = m; })) {
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
}
