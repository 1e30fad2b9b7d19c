use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ8K, "Q8_K", dequantize, quantize);

#[test]
fn activation_quantize_matches_ggml_cpu_backend() {
    check_activation_fixtures::<BlockQ8K>("Q8_K", &["cpu"]);
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use proptest::prelude::*;
    use rinfer_formats::QK_K;

    use super::super::quantize_avx512::quantize_row;
    use crate::quant::testing::{check_row_quantizer, quantizer_edge_rows};

    #[test]
    fn avx512_quantizer_matches_the_reference_on_edge_rows() {
        for row in quantizer_edge_rows(QK_K) {
            check_row_quantizer(quantize_row, &row);
        }
    }

    proptest! {
        #[test]
        fn avx512_quantizer_matches_the_reference_on_random_rows(
            x in proptest::collection::vec(-1e3f32..1e3, QK_K * 3),
            scale in prop_oneof![Just(1.0f32), Just(1e-30), Just(1e30)],
        ) {
            let x: Vec<f32> = x.iter().map(|v| v * scale).collect();
            check_row_quantizer(quantize_row, &x);
        }
    }
}
