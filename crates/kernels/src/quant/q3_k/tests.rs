use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_llama_cpp_bit_exact() {
    check_dequant_fixtures::<BlockQ3K>("Q3_K", true);
}

proptest! {
    #[test]
    fn reference_dot_matches_dequantized_dot((w, x) in dot_case::<BlockQ3K>(|b, d, _| b.d = d)) {
        assert_reference_dot(&w, &quantize::<BlockQ8K>(&x), 0.0);
    }
}
