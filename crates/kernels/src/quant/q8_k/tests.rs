use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ8K, "Q8_K", dequantize, quantize);

#[test]
fn activation_quantize_matches_ggml_cpu_backend() {
    check_activation_fixtures::<BlockQ8K>("Q8_K", &["cpu"]);
}
