use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_gguf_numpy_bit_exact() {
    check_dequant_fixtures::<BlockIq4Xs>("IQ4_XS", false);
}

proptest! {
    #[test]
    fn reference_dot_matches_dequantized_dot((w, x) in dot_case::<BlockIq4Xs>(|b, d, _| b.d = d)) {
        assert_reference_dot(&w, &quantize::<BlockQ8K>(&x), 0.0);
    }
}
