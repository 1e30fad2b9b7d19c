use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ4_0, "Q4_0", dequantize, quantize);
dot_tests!(BlockQ4_0, scales: [d], avx2: x86::vec_dot,
    min_terms: no_min_terms,
    neon: aarch64,
);
