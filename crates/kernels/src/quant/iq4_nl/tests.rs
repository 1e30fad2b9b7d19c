use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockIq4Nl, "IQ4_NL", dequantize_random_blocks);
dot_tests!(BlockIq4Nl, scales: [d], avx2: x86::vec_dot,
    min_terms: no_min_terms,
    neon: aarch64,
);

proptest::proptest! {
    #[test]
    fn quantize_round_trips_within_the_table_spacing(
        x in proptest::collection::vec(-4.0f32..4.0, <BlockIq4Nl as BlockFormat>::ELEMS * 2)
    ) {
        check_quantize_round_trip::<BlockIq4Nl>(&x, 0.2);
    }
}

#[test]
fn quantize_of_zeros_decodes_to_zeros() {
    check_quantize_round_trip::<BlockIq4Nl>(&[0.0; 512], 0.0);
}
