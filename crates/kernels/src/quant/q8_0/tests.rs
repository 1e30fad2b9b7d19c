use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ8_0, "Q8_0", dequantize, quantize);
dot_tests!(BlockQ8_0, scales: [d], avx2: x86::vec_dot,
    min_terms: no_min_terms,
    neon: aarch64,
);

#[test]
fn activation_quantize_matches_ggml_cpu_backend() {
    check_activation_fixtures::<BlockQ8_0>("Q8_0", &["cpu"]);
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use proptest::prelude::*;

    use super::super::quantize_avx512::quantize_row;
    use crate::quant::testing::{check_row_quantizer, quantizer_edge_rows};

    #[test]
    fn avx512_quantizer_matches_the_reference_on_edge_rows() {
        for row in quantizer_edge_rows(32) {
            check_row_quantizer(quantize_row, &row);
        }
    }

    proptest! {
        #[test]
        fn avx512_quantizer_matches_the_reference_on_random_rows(
            x in proptest::collection::vec(-1e3f32..1e3, 32 * 5),
            scale in prop_oneof![Just(1.0f32), Just(1e-30), Just(1e30)],
        ) {
            let x: Vec<f32> = x.iter().map(|v| v * scale).collect();
            check_row_quantizer(quantize_row, &x);
        }
    }
}
