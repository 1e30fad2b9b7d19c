use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_gguf_numpy_bit_exact() {
    check_dequant_fixtures::<BlockIq4Nl>("IQ4_NL", false);
}

proptest! {
    #[test]
    fn reference_dot_matches_dequantized_dot((w, x) in dot_case::<BlockIq4Nl>(|b, d, _| b.d = d)) {
        assert_reference_dot(&w, &quantize::<BlockQ8_0>(&x), 0.0);
    }
}
