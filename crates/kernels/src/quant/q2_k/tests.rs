use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_llama_cpp_bit_exact() {
    check_dequant_fixtures::<BlockQ2K>("Q2_K", true);
}

proptest! {
    #[test]
    fn reference_dot_matches_dequantized_dot((w, x) in dot_case::<BlockQ2K>(|b, d, m| { b.d = d; b.dmin = m; })) {
        let a = quantize::<BlockQ8K>(&x);
        let ad = dequantize(&a);
        let mins: f32 = w.iter().zip(ad.chunks_exact(256)).map(|(b, a)| {
            b.dmin.to_f32().abs() * 15.0 * a.iter().map(|v| v.abs()).sum::<f32>()
        }).sum();
        assert_reference_dot(&w, &a, mins);
    }
}
