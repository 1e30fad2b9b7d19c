use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ4K, "Q4_K", dequantize, quantize);
dot_tests!(BlockQ4K, scales: [d, dmin], avx2: x86::vec_dot,
    min_terms: packed_mins_magnitude,
    neon: aarch64,
);

proptest! {
    #[test]
    fn word_wise_scale_unpacking_matches_per_sub_block_decoding(q in any::<[u8; 12]>()) {
        let all = crate::quant::util::scales_mins_k4(&q);
        for j in 0..8 {
            prop_assert_eq!((all[j], all[8 + j]), crate::quant::util::scale_min_k4(j, &q));
        }
    }
}
