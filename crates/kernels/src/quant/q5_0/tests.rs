use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ5_0, "Q5_0", dequantize, quantize);
dot_tests!(BlockQ5_0, scales: [d], avx2: x86::vec_dot,
    min_terms: no_min_terms,
    neon: aarch64,
);
