use super::*;
use crate::quant::testing::*;

#[test]
fn activation_quantize_matches_ggml_bit_exact() {
    check_activation_fixtures::<BlockQ8_1>("Q8_1", &["ref", "cpu"]);
}
