use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ8_0, "Q8_0", dequantize, quantize);
dot_tests!(BlockQ8_0, scales: [d], avx2: x86::vec_dot, min_terms: no_min_terms);

#[test]
fn activation_quantize_matches_ggml_cpu_backend() {
    check_activation_fixtures::<BlockQ8_0>("Q8_0", &["cpu"]);
}
