use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ5K, "Q5_K", dequantize, quantize);
dot_tests!(BlockQ5K, scales: [d, dmin], avx2: x86::vec_dot,
    min_terms: packed_mins_magnitude,
    neon: aarch64,
);
