use super::*;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::testing::*;

fn min_terms_bound(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    packed_mins_magnitude(w, a, |b| (b.dmin, b.scales))
}

fixture_tests!(BlockQ5K, "Q5_K", dequantize, quantize);
dot_tests!(BlockQ5K, scales: [d, dmin], avx2: x86::vec_dot,
    min_terms: min_terms_bound,
    neon: aarch64,
);
